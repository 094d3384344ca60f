"""Finding the user's service from a `MODULE:Class` or `path/to/file.py:Class` target."""

from __future__ import annotations

import importlib
import importlib.util
import os
import sys
from pathlib import Path

from ..contract.descriptor import ServiceSpec
from ..contract.sdk import get_service_spec


class LoadError(Exception):
    """The target cannot be loaded; the message says why (CLI exit code 2)."""


def load_service(target: str) -> ServiceSpec:
    module_part, sep, attr = target.partition(":")
    if not module_part:
        raise LoadError(f"invalid target {target!r}: expected MODULE:Class or file.py:Class")
    if os.getcwd() not in sys.path:
        sys.path.insert(0, os.getcwd())  # like uvicorn: the current directory is importable
    module = _import(module_part)
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


def _import(module_part: str):
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
        except TypeError:
            raise  # a contract error at class definition: shown as is
        except Exception as exc:
            raise LoadError(f"importing {module_part} failed: {type(exc).__name__}: {exc}") \
                from exc
        return module
    try:
        return importlib.import_module(module_part)
    except ModuleNotFoundError as exc:
        if exc.name and module_part.startswith(exc.name):
            raise LoadError(f"no module named {module_part!r} (looked in {os.getcwd()} and "
                            "sys.path)") from None
        raise LoadError(f"importing {module_part} failed: {exc}") from exc
