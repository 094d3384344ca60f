"""Annotation metadata shared by the registry and the family codecs.

Kept apart from the registry so that a family module (tensors, files, images, frames)
can use it without importing the registry that loads the family.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from ..validators import ContentType, DataframeSchema, DType, FieldNumber, Shape

if TYPE_CHECKING:
    from .core import Codec


class CodecMarker:
    """Annotated metadata that pins a codec (codecs put it in the annotations they build).

    A rebuilt annotation such as `Annotated[np.ndarray, CodecMarker]` inside a model then
    resolves to the very codec that built it.
    """

    codec: Codec


#: Markers owned by some family; any other family seeing one raises TypeError.
FAMILY_MARKERS = (Shape, DType, ContentType, DataframeSchema)


def take_content_type(metadata: tuple[Any, ...], label: str
                      ) -> tuple[ContentType | None, tuple[Any, ...]]:
    """A file family's one optional ContentType, and the metadata pydantic keeps.

    Any other family marker on a file type is a definition-time TypeError.
    """
    content_type = None
    extra = []
    for m in metadata:
        if isinstance(m, ContentType):
            if content_type is not None:
                raise TypeError(f"{label} takes one ContentType (list patterns with commas)")
            content_type = m
        elif isinstance(m, FieldNumber):
            continue
        elif isinstance(m, FAMILY_MARKERS):
            raise TypeError(f"{type(m).__name__} does not apply to {label}")
        else:
            extra.append(m)
    return content_type, tuple(extra)
