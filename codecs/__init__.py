"""Codecs: one module per family of Python types, each the sole owner of its wire forms.

`codec_for(annotation)` finds the codec for a type; `pydantic_annotation(annotation)`
gives the annotation an API's validation model declares for it.
"""

from .base import MISSING, Codec, FieldError, HttpBody, JsonText, ProtoType, UnsupportedBody
from .registry import (
    CodecMarker,
    Family,
    class_named,
    codec_for,
    pydantic_annotation,
    register_family,
)

__all__ = [
    "MISSING",
    "Codec",
    "CodecMarker",
    "Family",
    "FieldError",
    "HttpBody",
    "JsonText",
    "ProtoType",
    "UnsupportedBody",
    "class_named",
    "codec_for",
    "pydantic_annotation",
    "register_family",
]
