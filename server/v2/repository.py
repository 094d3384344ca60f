"""The one data plane both v2 transports delegate to: models, health, metadata, infer.

As MLServer's `DataPlane`: the HTTP routes and the gRPC servicer convert their wire
form into `Tensor`s, decode here, and convert back what `outputs` gives. Inference runs
through the API's request plan within each protocol's one envelope, as the native routes
do (admission, time limits, batching: a batchable API batches v2 and native requests
together).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from ..codecs import Scope
from ..codecs.v2_facet import Tensor
from ..errors import NotFound
from ..runtime.control import ModelControl, control_off
from ..runtime.hosted import Hosted
from ..runtime.plan import RequestPlan
from ..runtime.service import ServiceRuntime
from ..version import __version__
from ..wire.oip import BINARY_EXTENSION
from .config import model_config
from .model import V2Model
from .shm_regions import EXTENSION as SHARED_MEMORY
from .shm_regions import SystemSharedMemory
from .statistics import metrics_off, statistics

#: The server's name in server metadata.
SERVER_NAME = "tensorwire"
#: The protocol extensions this server speaks (Triton's names), and the one it speaks
#: only while metrics are on (`system_shared_memory`: only with `--shared-memory
#: system`). `model_repository`: the index always, load and unload with
#: `--model-control explicit`.
EXTENSIONS = (BINARY_EXTENSION, "model_configuration", "model_repository")
STATISTICS = "statistics"


class Repository:
    """The v2 models of the server's services: one per API, named after it (under its
    service's prefix: `<prefix>.<api>`)."""

    def __init__(self, services: ServiceRuntime | Sequence[Hosted],
                 control: ModelControl | None = None) -> None:
        hosted = ([Hosted.of(services)] if isinstance(services, ServiceRuntime)
                  else list(services))
        #: Loads and unloads services (None: model control is off, loads are refused).
        self.control = control
        #: The server's services, in the order they were named.
        self.services = hosted
        self.admission = hosted[0].runtime.admission
        #: The server's settings (the first service's, which are the server's).
        self.settings = hosted[0].settings
        #: This worker's system shared-memory regions (`--shared-memory system`).
        self.shared_memory = SystemSharedMemory(self.settings.shared_memory == "system",
                                                self.settings.workers)
        self.models: dict[str, V2Model] = {}
        #: Model name -> (its service, its API's plan).
        self._homes: dict[str, tuple[Hosted, RequestPlan]] = {}
        for service in hosted:
            for api in service.spec.apis.values():
                name = service.public(api.name)
                self.models[name] = V2Model(api, name=name)
                self._homes[name] = (service, service.plans[api.name])

    def plan(self, name: str) -> RequestPlan:
        """The request plan of the model `name` (its API's)."""
        return self._homes[name][1]

    def service_of(self, name: str) -> Hosted:
        """The service the model `name` belongs to."""
        return self._homes[name][0]

    # ------------------------------------------------------------------ health
    @property
    def live(self) -> bool:
        """The process answers: true for as long as it serves at all (drain included)."""
        return True

    @property
    def ready(self) -> bool:
        """Ready for inference: every service that is to be loaded is, and the server
        does not drain."""
        return not self.admission.draining and all(
            service.ready for service in self.services if service.wanted)

    def model_ready(self, model: V2Model) -> bool:
        return (not self.admission.draining and self.plan(model.name).ready
                and model.unsupported is None)

    # ------------------------------------------------------------------ metadata
    def server_metadata(self) -> dict[str, Any]:
        extensions = [*EXTENSIONS, *((STATISTICS,) if self.settings.metrics else ()),
                      *((SHARED_MEMORY,) if self.shared_memory.enabled else ())]
        return {"name": SERVER_NAME, "version": __version__, "extensions": extensions}

    def config(self, name: str, version: str | None = None) -> dict[str, Any]:
        """Triton's model configuration of one model (`tensorwire.v2.config`)."""
        return model_config(self.model(name, version))

    def statistics(self, name: str | None = None, version: str | None = None
                   ) -> dict[str, Any]:
        """Triton's statistics of one model, or of every model when `name` is empty
        (`tensorwire.v2.statistics`)."""
        if not self.settings.metrics:
            raise metrics_off()
        models = [self.model(name, version)] if name else list(self.models.values())
        return {"model_stats": statistics(models)}

    def model(self, name: str, version: str | None = None) -> V2Model:
        """The model `name` (at `version`; empty or None: the only one), or NotFound."""
        model = self.models.get(name)
        if model is None:
            known = ", ".join(self.models) or "(none)"
            raise NotFound(f"unknown model {name!r}; this server has: {known}")
        if version and version != model.version:
            raise NotFound(f"model {name!r} has no version {version!r}; its version is "
                           f"{model.version!r}")
        return model

    def index(self) -> list[dict[str, str]]:
        """Every model with its state, and why it is unavailable (Triton's repository
        index): an API the protocol cannot carry is listed with the reason; a model
        whose service has other models says that they load and unload together."""
        out = []
        for model in self.models.values():
            ready = self.model_ready(model)
            entry = {"name": model.name, "version": model.version,
                     "state": "READY" if ready else "UNAVAILABLE"}
            service = self.service_of(model.name)
            if model.unsupported is not None:
                entry["reason"] = model.unsupported
            elif not ready:
                entry["reason"] = (self.admission.refusal()
                                   or self.plan(model.name).refusal).message
            elif len(service.spec.apis) > 1:
                others = [service.public(a) for a in service.spec.apis
                          if service.public(a) != model.name]
                entry["reason"] = (f"a model of service {service.name}, with "
                                   f"{', '.join(others)}: they load and unload together")
            out.append(entry)
        return out

    # ------------------------------------------------------------------ model control
    async def load(self, name: str) -> None:
        """Triton's load: the service of model `name` is loaded, or reloaded."""
        if self.control is None:
            raise control_off()
        await self.control.load(name)

    async def unload(self, name: str) -> None:
        """Triton's unload: the service of model `name` is unloaded."""
        if self.control is None:
            raise control_off()
        await self.control.unload(name)

    # ------------------------------------------------------------------ infer
    @staticmethod
    def decode(model: V2Model, inputs: Mapping[str, Tensor], requested: Sequence[str],
               scope: Scope, stream: bool = False) -> dict[str, Any]:
        """The API's validated arguments from a request's tensors, once the model is
        known to be callable and the `requested` outputs to exist. `scope` is the
        request's decode scope (its Context when the API takes files); `stream`: the
        request came in Triton's stream, which serves decoupled models too."""
        model.refuse_if_unsupported()
        if not stream:
            model.refuse_if_decoupled()
        model.check_requested(requested)
        return model.decode(inputs, scope)

    @staticmethod
    def outputs(model: V2Model, result: Any, requested: Sequence[str]) -> list[Tensor]:
        """A result's output tensors: only the `requested` ones (all if none)."""
        outputs = model.encode(result)
        if requested:
            wanted = set(requested)
            outputs = [t for t in outputs if t.name in wanted]
        return outputs
