"""`python -m tensorwire ...`: the `tensorwire` command, for environments without the script."""

from .ops.cli import main

if __name__ == "__main__":
    raise SystemExit(main())
