"""`tensorwire.IODescriptor`: a pydantic model whose fields may be tensors, frames, files.

Plain pydantic refuses `np.ndarray` as a field type. The metaclass below hands each
field annotation to the codec registry first, which swaps framework types for their
codec's annotation (a pydantic schema carrying Shape/DType/...), so the model validates
and serialises them like any other field, on every wire.
"""

from __future__ import annotations

import sys
import typing
from typing import Any, ClassVar, get_origin

from pydantic import BaseModel, ConfigDict
from pydantic._internal._model_construction import ModelMetaclass

from ..codecs import pydantic_annotation


def _resolve(value: Any, namespace: dict[str, Any]) -> Any:
    if not isinstance(value, str):
        return value
    module = sys.modules.get(namespace.get("__module__", ""))
    scope = dict(vars(module)) if module is not None else {}
    try:
        return eval(value, scope, dict(namespace))
    except Exception:
        return value  # a forward reference: pydantic resolves it later


class _IODescriptorMeta(ModelMetaclass):
    def __new__(mcs, name: str, bases: tuple[type, ...], namespace: dict[str, Any], **kw: Any):
        annotations = namespace.get("__annotations__")
        if annotations is None and "__annotate__" in namespace:  # Python 3.14 lazy annotations
            try:
                annotations = namespace["__annotate__"](1)
            except Exception:
                annotations = None
        if annotations:
            rewritten = {}
            for key, value in annotations.items():
                value = _resolve(value, namespace)
                if not isinstance(value, str) and get_origin(value) is not ClassVar \
                        and value is not ClassVar and not key.startswith("_"):
                    value = pydantic_annotation(value)
                rewritten[key] = value
            namespace["__annotations__"] = rewritten
            namespace.pop("__annotate__", None)
        return super().__new__(mcs, name, bases, namespace, **kw)


class IODescriptor(BaseModel, metaclass=_IODescriptorMeta):
    """Base of input/output models that may hold ML data (tensors, DataFrames, files)."""

    model_config = ConfigDict(
        val_json_bytes="base64", ser_json_bytes="base64", protected_namespaces=()
    )

    if typing.TYPE_CHECKING:  # pragma: no cover
        __tensorwire_io__: ClassVar[bool]
