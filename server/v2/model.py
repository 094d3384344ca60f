"""One API as an Open Inference Protocol model, derived from its APISpec and facets.

The model's name is the API's name and its version "1"; its inputs are the API's
fields, each as the tensors its codec's `v2` facet says (a data frame is one input per
column), and its outputs what the output codec's facet says (a model or dict: one per
field or key; anything else: `result`). Nothing here knows a data type: decoding hands
each field its tensors and lets the facet make the value, then the API's `Decoder`
validates everything exactly as for the native routes.

An API the protocol cannot carry (a complex tensor, a name used twice) is still a
model, listed with the reason in `unsupported`; inferring on it is refused. An API
that streams (a generator output, or a streamed input: one element per request) is a
*decoupled* model, Triton's term for responses that are not one per request: served
by `ModelStreamInfer` only (`tensorwire.v2.stream_infer`); `ModelInfer` refuses it.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from ..codecs import FieldError, Scope
from ..codecs.v2_facet import ANY_DATATYPE, Tensor, TensorMeta, V2Facet
from ..contract.decoding import Decoder
from ..contract.descriptor import APISpec, FieldSpec
from ..errors import InvalidArgument, Unimplemented
from ..wire.field_error import invalid_argument

#: The one version every model has.
VERSION = "1"
#: What model metadata calls the platform.
PLATFORM = "tensorwire"


@dataclass(frozen=True, slots=True)
class InputField:
    """One API field and the request inputs it reads (None: whatever no field names)."""

    field: FieldSpec
    facet: V2Facet
    names: tuple[str, ...] | None


class V2Model:
    """The v2 face of one API: metadata, decoding of request tensors, encoding."""

    def __init__(self, api: APISpec, version: str = VERSION, name: str | None = None) -> None:
        self.api = api
        #: The API's name, or its service's prefix and it (`iris.predict`).
        self.name = name or api.name
        self.version = version
        self.decoder = Decoder(api)
        self.fields = [InputField(f, f.codec.v2, f.codec.v2.input_names(f.name))
                       for f in api.fields]
        self.output = api.output.codec.v2
        self.inputs: list[TensorMeta] = [t for i in self.fields
                                         for t in i.facet.tensors(i.field.name)]
        #: Its outputs: the result's, or each chunk's for a generator.
        self.outputs: list[TensorMeta] = self.output.output_tensors()
        #: Whether its input is a stream: one request of Triton's stream per element.
        self.streams_in = api.stream_input is not None
        #: Triton's decoupled transaction policy: responses are not one per request.
        self.decoupled = api.output.stream or self.streams_in
        #: Input name -> the field that reads it.
        self.claimed = {n: i for i in self.fields for n in (i.names or ())}
        self.catch_all = next((i for i in self.fields if i.names is None), None)
        #: Whether the outputs are all known before a call (no dict keys, no columns
        #: that only the value has): requested names can be checked up front.
        self.static_outputs = bool(self.outputs)
        #: Why the protocol cannot carry this API (None: it can).
        self.unsupported = self._unsupported()
        #: The one input a raw HTTP body fills (Triton's header length 0), if any.
        self.raw_input = self._raw_input()

    def _unsupported(self) -> str | None:
        for i in self.fields:
            reason = i.facet.unsupported
            if reason is not None:
                return f"input {i.field.name!r}: {reason}"
        reason = self.output.output_unsupported
        if reason is not None:
            return f"output: {reason}"
        if sum(i.names is None for i in self.fields) > 1:
            return ("two inputs take every input no field names (frames without declared "
                    "columns): they cannot share them")
        for what, tensors in (("input", self.inputs), ("output", self.outputs)):
            names = [t.name for t in tensors]
            twice = sorted({n for n in names if names.count(n) > 1})
            if twice:
                return f"{what} name {twice[0]!r} is used twice (a field and a column?)"
        return None

    def _raw_input(self) -> TensorMeta | None:
        if self.catch_all is not None or len(self.inputs) != 1:
            return None
        (only,) = self.inputs
        if only.datatype == ANY_DATATYPE:
            return None
        return only

    # ------------------------------------------------------------------ metadata
    def metadata(self) -> dict[str, Any]:
        """The model metadata document (HTTP JSON; gRPC has the same fields)."""
        out: dict[str, Any] = {
            "name": self.name, "versions": [self.version], "platform": PLATFORM,
            "inputs": [t.to_json() for t in self.inputs],
            "outputs": [t.to_json() for t in self.outputs],
        }
        if self.unsupported is not None:
            out["error"] = self.unsupported
        return out

    def refuse_if_unsupported(self) -> None:
        """Unimplemented (501 / UNIMPLEMENTED) naming the reason, for an API the
        protocol cannot carry."""
        if self.unsupported is not None:
            raise Unimplemented(f"model {self.name!r} cannot be called over the Open "
                                f"Inference Protocol: {self.unsupported}")

    def refuse_if_decoupled(self) -> None:
        """Unimplemented (501 / UNIMPLEMENTED) for `ModelInfer` on a decoupled model:
        only Triton's stream carries its responses, as Triton says of its own."""
        if self.decoupled:
            why = ("its input is a stream, one request per element" if self.streams_in
                   else "it streams its output, one response per chunk")
            raise Unimplemented(f"model {self.name!r} is decoupled ({why}): call it with "
                                "ModelStreamInfer (tritonclient's start_stream and "
                                "async_stream_infer), or at its own route")

    # ------------------------------------------------------------------ calls
    def decode(self, tensors: Mapping[str, Tensor], scope: Scope) -> dict[str, Any]:
        """The API's validated arguments from the request's input tensors."""
        if self.catch_all is None:
            for name in tensors:
                if name not in self.claimed:
                    known = ", ".join(t.name for t in self.inputs) or "(none)"
                    raise InvalidArgument.at([name], f"unknown input; this model takes: "
                                                     f"{known}", "extra_forbidden")
        values: dict[str, Any] = {}
        for i in self.fields:
            if i.names is None:
                mine = {n: t for n, t in tensors.items() if n not in self.claimed}
            else:
                mine = {n: tensors[n] for n in i.names if n in tensors}
            if not mine:
                continue  # left out: the field's default, or "Field required"
            try:
                values[i.field.name] = i.facet.decode(i.field.name, mine, scope)
            except FieldError as exc:
                raise invalid_argument(exc.under(i.field.name)) from None
        return self.decoder.decode_values(values)

    def check_requested(self, names: Iterable[str]) -> None:
        """Refuse requested outputs this model never has (when that is known before
        the call: a dict's keys or a frame's columns are known only after it)."""
        if not self.static_outputs:
            return
        known = {t.name for t in self.outputs}
        for name in names:
            if name not in known:
                raise InvalidArgument.at(["outputs", name], "unknown output; this model has: "
                                         f"{', '.join(sorted(known)) or '(none)'}",
                                         "unknown_output")

    def encode(self, result: Any) -> list[Tensor]:
        """The output tensors of a result (None fields and values left out)."""
        return self.output.encode_outputs(result)
