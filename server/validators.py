"""`tensorwire.validators`: Shape, DType, ContentType, DataframeSchema, FieldNumber."""

from .codecs.validators import ContentType, DataframeSchema, DType, FieldNumber, Shape

__all__ = ["ContentType", "DType", "DataframeSchema", "FieldNumber", "Shape"]
