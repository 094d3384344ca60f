"""The Open Inference Protocol over HTTP, on the service's own aiohttp app.

`GET /v2`, `/v2/health/live`, `/v2/health/ready`; `GET /v2/models/{m}[/versions/{v}]`
and `.../ready`; `POST .../infer` with JSON tensors or Triton's binary tensor extension
in both directions (`Inference-Header-Content-Length`, `binary_data_size`,
`binary_data`, `binary_data_output`, the raw single-input body); Triton's
`POST /v2/repository/index`, which lists every API with its state and, for one the
protocol cannot carry, the reason, and `POST /v2/repository/models/{m}/load|unload`
(model control, `tensorwire.runtime.control`); Triton's model configuration and statistics
extensions, `GET .../config` and `GET /v2/models[/{m}[/versions/{v}]]/stats`; Triton's
system shared-memory extension, `GET /v2/systemsharedmemory[/region/{r}]/status` and
`POST .../register|unregister`, with inputs and outputs in regions
(`tensorwire.v2.shm_regions`, off unless `--shared-memory system`). Triton's routes of
the extensions tensorwire does not serve answer 501 naming theirs.

Bodies are read whatever their Content-Type (tritonclient sends none). Errors are the
one error model's JSON body (`{"error": ...}` first): validation failures of any kind
are 400 as the protocol asks, an unknown model or version 404, a stream 501.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Any

import orjson
from aiohttp import web

from ..codecs.v2_facet import Tensor
from ..context import Context
from ..errors import InvalidArgument, PayloadTooLarge, TensorwireError
from ..http.body import write_view
from ..http.direct import Handler
from ..http.request_envelope import HttpEnvelope, HttpRoute
from ..http.responses import error_response, json_errors
from ..runtime.plan import RequestPlan
from ..settings import Settings
from ..wire.oip import (
    INFERENCE_HEADER_CONTENT_LENGTH,
    HttpInferResponse,
    ResponseOutput,
    build_http_infer_response,
)
from .infer_body import read_infer_request
from .model import V2Model
from .repository import Repository
from .shm_regions import disabled, in_decoupled
from .unsupported import EXTENSIONS, Extension

#: Responses up to this size are joined and sent in one write; larger ones are
#: written chunk by chunk, each output's bytes straight from its array.
JOIN_LIMIT = 1 << 20
_JSON = {"Content-Type": "application/json"}


def _json(payload: object, status: int = 200) -> web.Response:
    return web.Response(status=status, body=orjson.dumps(payload), headers=_JSON)



def _region(request: web.Request) -> str:
    """The shared-memory region a route names ("" for every region)."""
    return request.match_info.get("region", "")


def _emptied(change: Callable[..., Any]) -> Callable[..., dict[str, Any]]:
    """`change`, answering the protocol's empty JSON object."""
    def changed(*args: Any) -> dict[str, Any]:
        change(*args)
        return {}

    return changed


def _answer(fn: Callable[..., Any], *args: Any) -> web.Response:
    """`fn(*args)` as JSON, or the error model's answer to what it raised."""
    try:
        return _json(fn(*args))
    except TensorwireError as exc:
        return _error(exc)

def _error(exc: TensorwireError, request_id: str | None = None) -> web.Response:
    """The error model's response; every invalid argument is 400, as the protocol asks
    (a content type the API refuses is not a 415 here: tritonclient sends none)."""
    resp = error_response(exc, request_id)
    if isinstance(exc, InvalidArgument) and resp.status != 400:
        resp.set_status(400)
    return resp


class V2Routes:
    """The handlers of every v2 route, over one Repository."""

    def __init__(self, repository: Repository, settings: Settings) -> None:
        self.repository = repository
        self.max_size = settings.max_request_size
        #: Each model's infer handler, made by the app's envelope (`install`).
        self.handlers: dict[str, Handler] = {}

    def install(self, router: web.UrlDispatcher, envelope: HttpEnvelope) -> None:
        """Add the routes (before the app's catch-all, which answers 404/405); inference
        goes through the app's one envelope, as the native routes do."""
        self.handlers = {
            name: envelope.handler(envelope.route(model_route(
                self.repository, model, self.repository.plan(name), self.max_size)))
            for name, model in self.repository.models.items()}
        router.add_get("/v2", json_errors(self.server_metadata))
        router.add_get("/v2/health/live", json_errors(self.live))
        router.add_get("/v2/health/ready", json_errors(self.ready))
        router.add_post("/v2/repository/index", json_errors(self.index))
        router.add_post("/v2/repository/models/{model}/load", json_errors(self.load))
        router.add_post("/v2/repository/models/{model}/unload", json_errors(self.unload))
        # before `/v2/models/{model}`, which would take "stats" for a model's name
        router.add_get("/v2/models/stats", json_errors(self.every_statistics))
        for base in ("/v2/models/{model}", "/v2/models/{model}/versions/{version}"):
            router.add_get(base, json_errors(self.model_metadata))
            router.add_get(base + "/ready", json_errors(self.model_ready))
            router.add_get(base + "/config", json_errors(self.model_config))
            router.add_get(base + "/stats", json_errors(self.statistics))
            router.add_post(base + "/infer", self.infer)
        for base in ("/v2/systemsharedmemory", "/v2/systemsharedmemory/region/{region}"):
            router.add_get(base + "/status", json_errors(self.shm_status))
            router.add_post(base + "/register", json_errors(self.shm_register))
            router.add_post(base + "/unregister", json_errors(self.shm_unregister))
        for base in ("/v2/cudasharedmemory", "/v2/cudasharedmemory/region/{region}"):
            router.add_get(base + "/status", json_errors(self.cuda_status))
            router.add_post(base + "/unregister", json_errors(self.cuda_unregister))
        for extension in EXTENSIONS:  # 501 naming the extension, rather than a 404
            for method, path in extension.routes:
                router.add_route(method, path, json_errors(_refusing(extension)))

    # ------------------------------------------------------------------ server
    async def server_metadata(self, _: web.Request) -> web.Response:
        return _json(self.repository.server_metadata())

    async def live(self, _: web.Request) -> web.Response:
        return _json({"live": self.repository.live})

    async def ready(self, _: web.Request) -> web.Response:
        if self.repository.ready:
            return _json({"ready": True})
        return _json({"ready": False, "error": "the server is not ready"}, 400)

    async def index(self, request: web.Request) -> web.Response:
        """Triton's repository index; a body `{"ready": true}` lists ready models only."""
        body = await request.read()
        only_ready = False
        if body.strip():
            try:
                options = orjson.loads(body)
            except orjson.JSONDecodeError as exc:
                return _error(InvalidArgument(f"the request is not valid JSON: {exc}"))
            if not isinstance(options, dict):
                return _error(InvalidArgument("the request must be a JSON object"))
            only_ready = options.get("ready") is True
        entries = self.repository.index()
        if only_ready:
            entries = [e for e in entries if e["state"] == "READY"]
        return _json(entries)

    async def load(self, request: web.Request) -> web.Response:
        """Triton's load (model control): the model's service loads, or reloads."""
        try:
            _load_parameters(await request.read())
            await self.repository.load(request.match_info["model"])
        except TensorwireError as exc:
            return _error(exc)
        return _json({})

    async def unload(self, request: web.Request) -> web.Response:
        """Triton's unload (model control): the model's service is unloaded (its other
        models with it; Triton's `unload_dependents` parameter has nothing to add)."""
        try:
            await self.repository.unload(request.match_info["model"])
        except TensorwireError as exc:
            return _error(exc)
        return _json({})

    # ------------------------------------------------------------------ shared memory
    async def shm_status(self, request: web.Request) -> web.Response:
        """Triton's system shared-memory status: every region, or the one named."""
        return _answer(self.repository.shared_memory.status, _region(request))

    async def shm_register(self, request: web.Request) -> web.Response:
        """Register the region the route names: `{"key", "offset", "byte_size"}`."""
        shared = self.repository.shared_memory

        def register(region: str, body: bytes) -> dict[str, Any]:
            if not shared.enabled:
                raise disabled()
            shared.register(region, *_register_request(body))
            return {}

        return _answer(register, _region(request), await request.read())

    async def shm_unregister(self, request: web.Request) -> web.Response:
        """Unregister the region the route names, or every region."""
        return _answer(_emptied(self.repository.shared_memory.unregister), _region(request))

    async def cuda_status(self, request: web.Request) -> web.Response:
        """Triton's CUDA shared-memory status: none (registering is unsupported)."""
        return _answer(self.repository.shared_memory.cuda_status, _region(request))

    async def cuda_unregister(self, request: web.Request) -> web.Response:
        return _answer(_emptied(self.repository.shared_memory.cuda_unregister),
                       _region(request))

    # ------------------------------------------------------------------ models
    def _model(self, request: web.Request) -> V2Model:
        """The model (and version) the route names, or NotFound."""
        return self.repository.model(request.match_info["model"],
                                     request.match_info.get("version"))

    async def model_metadata(self, request: web.Request) -> web.Response:
        try:
            model = self._model(request)
        except TensorwireError as exc:
            return _error(exc)
        return _json(model.metadata())

    async def model_config(self, request: web.Request) -> web.Response:
        """Triton's model configuration extension."""
        try:
            return _json(self.repository.config(request.match_info["model"],
                                                request.match_info.get("version")))
        except TensorwireError as exc:
            return _error(exc)

    async def statistics(self, request: web.Request) -> web.Response:
        """Triton's statistics extension: one model's (a version's), or every model's."""
        try:
            return _json(self.repository.statistics(request.match_info.get("model"),
                                                    request.match_info.get("version")))
        except TensorwireError as exc:
            return _error(exc)

    async def every_statistics(self, request: web.Request) -> web.Response:
        """Every model's statistics; but a model named `stats` keeps its metadata at its
        own URL (Triton's routes have the same two meanings for it; over gRPC they are
        two rpcs)."""
        named_stats = self.repository.models.get("stats")
        if named_stats is not None:
            return _json(named_stats.metadata())
        return await self.statistics(request)

    async def model_ready(self, request: web.Request) -> web.Response:
        try:
            model = self._model(request)
        except TensorwireError as exc:
            return _error(exc)
        if self.repository.model_ready(model):
            return _json({"name": model.name, "ready": True})
        reason = model.unsupported or "the server is not ready"
        return _json({"name": model.name, "ready": False, "error": reason}, 400)

    async def infer(self, request: web.Request) -> web.StreamResponse:
        """The model's infer route, through the one HTTP envelope (an unknown model or
        version is 404 before admission: no metric for unknown names)."""
        try:
            model = self._model(request)
        except TensorwireError as exc:
            return _error(exc)
        return await self.handlers[model.name](request)


def _load_parameters(body: bytes) -> None:
    """Refuse what Triton's load can carry and tensorwire cannot honour: a `config` to
    load the model with, or its files (`file:<path>`): a service is loaded as it was
    named when the server started."""
    if not body.strip():
        return
    try:
        options = orjson.loads(body)
    except orjson.JSONDecodeError as exc:
        raise InvalidArgument(f"the request is not valid JSON: {exc}") from None
    parameters = options.get("parameters") if isinstance(options, dict) else None
    if not isinstance(parameters, dict | None):
        raise InvalidArgument("parameters must be a JSON object")
    for key in parameters or ():
        if key == "config" or key.startswith("file:"):
            raise InvalidArgument(f"load parameter {key!r} is not supported: tensorwire loads "
                                  "a service as the server was started with it")


def _register_request(body: bytes) -> tuple[str, int, int]:
    """(key, offset, byte_size) of a register request's JSON body (offset: 0 if absent)."""
    try:
        request = orjson.loads(body) if body.strip() else {}
    except orjson.JSONDecodeError as exc:
        raise InvalidArgument(f"the request is not valid JSON: {exc}") from None
    if not isinstance(request, dict):
        raise InvalidArgument("the register request must be a JSON object")
    for required in ("key", "byte_size"):
        if required not in request:
            raise InvalidArgument(f"Shared memory register request has no '{required}' "
                                  "field")
    if not isinstance(request["key"], str):
        raise InvalidArgument("Shared memory register request: 'key' must be a string")
    return request["key"], request.get("offset", 0), request["byte_size"]


def _refusing(extension: Extension) -> Handler:
    async def refuse(_: web.Request) -> web.Response:
        return _error(extension.refusal())

    return refuse


def model_route(repository: Repository, model: V2Model, plan: RequestPlan,
                max_size: int) -> HttpRoute:
    """How one v2 model's `POST .../infer` reads and answers, over its API's plan."""

    shared = repository.shared_memory

    async def read(request: web.Request, scope: Any) -> tuple[dict[str, Any], Any]:
        length = request.content_length
        if length is not None and length > max_size:
            raise PayloadTooLarge(f"request body of {length} bytes exceeds the limit "
                                  f"of {max_size} bytes")
        # binary tensors straight into one buffer; gzip/deflate bodies (tritonclient's
        # request_compression_algorithm) inflated within the size limit
        parsed = await read_infer_request(request, max_size, model.raw_input)
        # tensors in shared-memory regions (Triton's extension), checked before any read
        placed = shared.place(((i.name, i.datatype, i.shape, i.parameters,
                                i.data is not None) for i in parsed.inputs),
                              ((o.name, o.parameters) for o in parsed.outputs))
        if placed is None:
            inputs = {i.name: Tensor(i.name, i.to_numpy(), i.parameters)
                      for i in parsed.inputs}
        else:
            if model.decoupled:
                raise in_decoupled(model.name)
            inputs = {i.name: Tensor(i.name, placed.inputs[i.name] if i.name in placed.inputs
                                     else i.to_numpy(), i.parameters) for i in parsed.inputs}
        kwargs = repository.decode(model, inputs, [o.name for o in parsed.outputs], scope)
        return kwargs, (parsed, placed)

    def answer(result: Any, request: web.Request, ctx: Context | None,
               kept: Any) -> web.StreamResponse | Awaitable[web.StreamResponse]:
        parsed, placed = kept
        outputs = repository.outputs(model, result, [o.name for o in parsed.outputs])
        written = placed.write(outputs) if placed is not None else {}
        built = build_http_infer_response(
            [ResponseOutput(t.name, t.array, parsed.wants_binary(t.name),
                            t.parameters or None) if t.name not in written else
             ResponseOutput(t.name, t.array, True,
                            {**t.parameters, **written[t.name].parameters}, shared=True)
             for t in outputs],
            model_name=model.name, model_version=model.version, id=parsed.id)
        return respond(request, built, ctx)

    return HttpRoute(model.name, plan, read, answer, error=_error, what=f"v2 {model.name}",
                     timed=True)


def respond(request: web.Request, built: HttpInferResponse, ctx: Context | None
            ) -> web.StreamResponse | Awaitable[web.StreamResponse]:
    """The body: joined when small, else each output written from its array."""
    headers: dict[str, Any] = {"Content-Type": built.content_type}
    if ctx is not None:
        headers.update(ctx.response.headers)
    if built.header_length is not None:
        headers[INFERENCE_HEADER_CONTENT_LENGTH] = str(built.header_length)
    if built.content_length <= JOIN_LIMIT or len(built.chunks) == 1:
        return web.Response(body=built.body(), headers=headers)
    return _written(request, built, headers)


async def _written(request: web.Request, built: HttpInferResponse,
                   headers: dict[str, Any]) -> web.StreamResponse:
    resp = web.StreamResponse(headers=headers)
    resp.content_length = built.content_length
    await resp.prepare(request)
    for chunk in built.chunks:
        await write_view(resp, chunk)  # an output's memory, in drained steps
    await resp.write_eof()
    return resp
