"""Codecs: one module per family of Python types, each the sole owner of its wire forms.

`codec_for(annotation)` finds the codec for a type; `pydantic_annotation(annotation)`
gives the annotation an API's validation model declares for it. A codec's core is in
`core`, its per-wire facets in `http_facet` and `proto_facet`.
"""

from ..wire.field_error import FieldError
from .core import MISSING, REPLY, Codec, Scope
from .http_facet import HttpBody, JsonText, UnsupportedBody
from .markers import CodecMarker
from .proto_facet import ProtoType
from .registry import (
    Family,
    class_named,
    codec_for,
    pydantic_annotation,
    register_family,
)

__all__ = [
    "MISSING",
    "REPLY",
    "Codec",
    "CodecMarker",
    "Family",
    "FieldError",
    "HttpBody",
    "JsonText",
    "ProtoType",
    "Scope",
    "UnsupportedBody",
    "class_named",
    "codec_for",
    "pydantic_annotation",
    "register_family",
]
