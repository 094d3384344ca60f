"""Decoding one API's request values into the method's validated arguments.

Every transport ends here, so both protocols validate through the same pydantic model:
HTTP hands over JSON bytes (parsed once, straight from bytes), multipart values or a
root body's value; gRPC the values its codecs read from the message. Unknown fields are
refused inside the user's models as at the top level (`closed`): the validators here are
the closed ones wherever a user's model would have dropped them.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Annotated, Any

from pydantic import BaseModel, TypeAdapter, ValidationError
from pydantic_core import SchemaValidator

from ..codecs import MISSING, JsonText, pydantic_annotation
from ..codecs.finite import MESSAGE, find_nonfinite
from ..errors import InvalidArgument
from ..wire.field_error import invalid_argument
from .closed import closed_adapter_validator, closed_model_validator
from .descriptor import APISpec


class Decoder:
    """The validated arguments of one API, from whatever its transport extracted."""

    __slots__ = ("_closed", "_field_adapters", "_model", "_root", "_root_adapter", "_walk",
                 "_walk_all", "api", "is_root")

    def __init__(self, api: APISpec) -> None:
        self.api = api
        self.is_root = api.is_root
        self._model = api.input_model
        #: The input model's closed validator (None: the model's own is closed already).
        self._closed = closed_model_validator(api.input_model)
        self._root = api.root_field if api.is_root else None
        self._root_adapter: Any = api.root_adapter
        if api.root_adapter is not None:
            self._root_adapter = closed_adapter_validator(api.root_adapter) or api.root_adapter
        self._field_adapters: dict[str, Any] | None = None
        # Values pydantic's checks of this schema do not reach for NaN and infinity
        # (codecs.finite): models of the user's and JSON values; an `input_spec` model
        # is the user's own, so all of it.
        self._walk_all = api.input_shape == "input_spec"
        self._walk = () if self._walk_all else tuple(
            f.name for f in api.fields if f.codec.unchecked_floats)

    def decode_json(self, body: bytes) -> dict[str, Any]:
        """Validated keyword arguments from a JSON object body, parsed once from bytes."""
        if self.is_root:
            return self.decode_root(JsonText(body))
        try:
            model = (self._closed.validate_json(body or b"{}") if self._closed is not None
                     else self._model.model_validate_json(body or b"{}"))
        except ValidationError as exc:
            raise invalid_argument(exc) from None
        return self._finite(model)

    def decode_values(self, values: dict[str, Any]) -> dict[str, Any]:
        """Validated keyword arguments from already-decoded Python values (gRPC, parts).

        A value that is `JsonText` (a multipart JSON part) is parsed by pydantic in JSON
        mode for its own field, exactly as the same field inside a JSON body would be.
        """
        if self._root is not None:
            return self.decode_root(values.get(self._root.name, MISSING))
        try:
            if any(type(v) is JsonText for v in values.values()):
                values = {k: self._json_part(k, v) for k, v in values.items()}
            model = (self._closed.validate_python(values) if self._closed is not None
                     else self._model.model_validate(values))
        except ValidationError as exc:
            raise invalid_argument(exc) from None
        return self._finite(model)

    def json_decoder(self) -> Callable[[bytes], dict[str, Any]]:
        """`decode_json` bound once, for a handler compiled per API (see `_bound`)."""
        if self.is_root:
            return self.decode_json
        return self._bound(json=True)

    def read_values_decoder(self) -> Callable[[dict[str, Any]], dict[str, Any]]:
        """`decode_values` bound once, for a handler compiled per API whose values were
        read from a protobuf message (so none is `JsonText`; see `_bound`)."""
        if self._root is not None:
            root, decode_root = self._root.name, self.decode_root
            return lambda values: decode_root(values.get(root, MISSING))
        return self._bound(json=False)

    def element_decoder(self) -> Callable[[Any], dict[str, Any]]:
        """One value of the API's only input (an element of a streamed input, as a
        message's body gave it) -> the validated arguments of a one-value request: JSON
        text validated straight from its bytes by the field's own validator (not the
        model's, which would take it as a whole body), any other value by the model's;
        an empty body (`MISSING`) as the input left out."""
        if self._root is not None:
            return self.decode_root
        (field,) = self.api.fields
        name, python = field.name, self.read_values_decoder()
        adapter = self._adapters()[name]
        walk = name in self._walk or self._walk_all

        def decode(value: Any) -> dict[str, Any]:
            if type(value) is not JsonText:
                return python({} if value is MISSING else {name: value})
            try:
                validated = adapter.validate_json(value.data)
            except ValidationError as exc:
                raise invalid_argument(exc, prefix=(name,)) from None
            if walk:
                _refuse_nonfinite((name,), validated)
            return {name: validated}

        return decode

    def _bound(self, json: bool) -> Callable[[Any], dict[str, Any]]:
        """The model's validation as one closure: its validator called straight (what
        `model_validate[_json]` calls, less the Python frame around it), and the
        arguments the model's own values where no float escapes pydantic's checks. Per
        call: one validation and one dict copy, where the general methods also scan
        for JsonText and call `_finite`."""
        model = self._model
        validator = self._closed or model.__pydantic_validator__
        # a model not fully built yet (a forward reference) has a stand-in validator
        # that model_validate rebuilds
        built = isinstance(validator, SchemaValidator)
        finite = self._finite if self._walk_all or self._walk else _arguments
        if not json:
            validate = validator.validate_python if built else model.model_validate

            def decode_values(values: dict[str, Any]) -> dict[str, Any]:
                try:
                    return finite(validate(values))
                except ValidationError as exc:
                    raise invalid_argument(exc) from None

            return decode_values
        validate_json = validator.validate_json if built else model.model_validate_json

        def decode_json(body: bytes) -> dict[str, Any]:
            try:
                return finite(validate_json(body or b"{}"))
            except ValidationError as exc:
                raise invalid_argument(exc) from None

        return decode_json

    def _finite(self, model: BaseModel) -> dict[str, Any]:
        """The arguments, unless a walked value holds a NaN or infinity not opted in."""
        if self._walk_all:
            _refuse_nonfinite((), model)
        kwargs = _arguments(model)
        for name in self._walk:
            _refuse_nonfinite((name,), kwargs[name])
        return kwargs

    def _json_part(self, name: str, value: Any) -> Any:
        if type(value) is not JsonText:
            return value
        adapter = self._adapters().get(name)
        if adapter is None:  # an unknown part: let the model report it as extra
            return value.data
        try:
            return adapter.validate_json(value.data)
        except ValidationError as exc:
            raise invalid_argument(exc, prefix=(name,)) from None

    def _adapters(self) -> dict[str, Any]:
        """Each field's own validator (a TypeAdapter's, closed where it holds models)."""
        if self._field_adapters is None:
            adapters: dict[str, Any] = {}
            for f in self.api.fields:
                adapter: TypeAdapter[Any] = TypeAdapter(
                    Annotated[pydantic_annotation(f.annotation), f.info])
                adapters[f.name] = closed_adapter_validator(adapter) or adapter
            self._field_adapters = adapters
        return self._field_adapters

    def decode_root(self, value: Any) -> dict[str, Any]:
        """Validated arguments for a root input from its one value (or its JSON text)."""
        f = self._root
        assert f is not None and self._root_adapter is not None
        try:
            if value is MISSING:
                if f.required:
                    raise InvalidArgument.at([f.name], "Field required", "missing")
                validated = f.default
            elif type(value) is JsonText:
                validated = self._root_adapter.validate_json(value.data)
            else:
                validated = self._root_adapter.validate_python(value)
        except ValidationError as exc:
            raise invalid_argument(exc, prefix=(f.name,)) from None
        if self._walk:
            _refuse_nonfinite((f.name,), validated)
        return {f.name: validated}


def _refuse_nonfinite(prefix: tuple[str, ...], value: Any) -> None:
    hit = find_nonfinite(value)
    if hit is not None:
        raise InvalidArgument.at([*prefix, *hit], MESSAGE, "finite_number")


def _arguments(model: BaseModel) -> dict[str, Any]:
    # The validated values themselves (no model_dump: nested models stay models).
    return dict(model.__dict__)
