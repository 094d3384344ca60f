"""Finding the user's service from a `MODULE:Class` or `path/to/file.py:Class` target.

Two kinds of failure, told apart because the user needs different things from them:

- `LoadError`: the target is wrong (no such module, file or class, not a service, an
  invalid contract). One line says why; the CLI exits 2.
- `ImportFailure`: the user's module raised while it was imported (a missing dependency
  inside it, a bug at module level). The full traceback matters here, headed by one line
  naming the target and the phase (`failure_report`); the CLI exits 1. Its sibling for
  the `__init__` phase is `tensorwire.runtime.service.InitFailure`.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import importlib
import importlib.util
import os
import sys
import traceback
from pathlib import Path
from types import TracebackType

from ..contract.descriptor import ServiceSpec
from ..contract.sdk import get_service_spec
from ..contract.signature import ContractError


class LoadError(Exception):
    """The target cannot be loaded; the message says why (CLI exit code 2)."""


class ImportFailure(Exception):
    """Importing the service's module raised; the user's exception is `__cause__`."""

    phase = "import"

    def __init__(self, target: str, cause: BaseException) -> None:
        self.target = target
        super().__init__(f"service {target} failed in import: {type(cause).__name__}: "
                         f"{cause}")


#: Frames of these folders lead up to the user's code but say nothing about the failure.
_PLUMBING = (
    *(os.path.dirname(m.__file__ or "") + os.sep
      for m in (importlib, asyncio, concurrent.futures)),
    str(Path(__file__).resolve().parents[1]) + os.sep,
)


def failure_report(exc: BaseException) -> str:
    """One line naming the service and the phase, then the user's traceback.

    Leading frames of the import machinery, the thread pool and tensorwire itself are
    left out, so the traceback starts where the user's code does.
    """
    cause = exc.__cause__ if exc.__cause__ is not None else exc
    tb = _user_frames(cause.__traceback__)
    lines = traceback.format_exception(type(cause), cause, tb)
    return f"{exc}\n" + "".join(lines).rstrip("\n")


def _user_frames(tb: TracebackType | None) -> TracebackType | None:
    start = tb
    while start is not None and start.tb_next is not None:
        name = start.tb_frame.f_code.co_filename
        if not (name.startswith("<frozen") or name.startswith(_PLUMBING)):
            break
        start = start.tb_next
    return start


def load_service(target: str) -> ServiceSpec:
    module_part, sep, attr = target.partition(":")
    if not module_part:
        raise LoadError(f"invalid target {target!r}: expected MODULE:Class or file.py:Class")
    if os.getcwd() not in sys.path:
        sys.path.insert(0, os.getcwd())  # like uvicorn: the current directory is importable
    module = _import(module_part, target)
    if not sep:
        candidates = [v for v in vars(module).values() if _is_service(v, module.__name__)]
        if len(candidates) != 1:
            names = ", ".join(c.__name__ for c in candidates) or "none"
            raise LoadError(f"{module_part}: name the service class as {module_part}:Class "
                            f"(services found: {names})")
        return get_service_spec(candidates[0])
    obj = module
    for part in attr.split("."):
        try:
            obj = getattr(obj, part)
        except AttributeError:
            raise LoadError(f"{module_part} has no attribute {attr!r}") from None
    try:
        return get_service_spec(obj)
    except TypeError as exc:
        raise LoadError(f"{target}: {exc}") from None


def _is_service(value: object, module_name: str) -> bool:
    try:
        return get_service_spec(value).cls.__module__ == module_name
    except TypeError:
        return False


def _import(module_part: str, target: str):
    if module_part.endswith(".py") or os.sep in module_part or "/" in module_part:
        path = Path(module_part)
        if not path.is_file():
            raise LoadError(f"no such file: {module_part}")
        name = path.stem
        parent = str(path.resolve().parent)
        if parent not in sys.path:
            sys.path.insert(0, parent)
        spec = importlib.util.spec_from_file_location(name, path)
        if spec is None or spec.loader is None:
            raise LoadError(f"cannot import {module_part}")
        module = importlib.util.module_from_spec(spec)
        sys.modules[name] = module
        try:
            spec.loader.exec_module(module)
        except ContractError:
            raise  # a contract error at class definition: shown as is
        except Exception as exc:
            raise ImportFailure(target, exc) from exc
        return module
    try:
        return importlib.import_module(module_part)
    except ContractError:
        raise
    except ModuleNotFoundError as exc:
        if exc.name and _is_target(module_part, exc.name):
            raise LoadError(f"no module named {module_part!r} (looked in {os.getcwd()} and "
                            "sys.path)") from None
        raise ImportFailure(target, exc) from exc
    except Exception as exc:
        raise ImportFailure(target, exc) from exc


def _is_target(module_part: str, missing: str) -> bool:
    """Whether the missing module is the target (or a package on its path), not one
    the target itself imports."""
    return module_part == missing or module_part.startswith(missing + ".")


def source_dir(target: str) -> Path:
    """The folder of the service's source, found without running it (for `--reload`,
    whose worker imports the module afresh on every start)."""
    module_part = target.partition(":")[0]
    if not module_part:
        raise LoadError(f"invalid target {target!r}: expected MODULE:Class or file.py:Class")
    if module_part.endswith(".py") or os.sep in module_part or "/" in module_part:
        path = Path(module_part)
        if not path.is_file():
            raise LoadError(f"no such file: {module_part}")
        return path.resolve().parent
    if os.getcwd() not in sys.path:
        sys.path.insert(0, os.getcwd())
    try:
        spec = importlib.util.find_spec(module_part)
    except (ImportError, ValueError):
        spec = None
    if spec is None or not spec.origin or not os.path.isfile(spec.origin):
        raise LoadError(f"no module named {module_part!r} (looked in {os.getcwd()} and "
                        "sys.path)")
    return Path(spec.origin).resolve().parent
