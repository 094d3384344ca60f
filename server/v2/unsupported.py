"""Triton's protocol extensions tensorwire does not serve, named where a client asks.

`inference.GRPCInferenceService` is served whole: a client compiled from Triton's
grpc_service.proto finds every rpc, and an rpc of an extension tensorwire does not
support answers UNIMPLEMENTED naming that extension, instead of gRPC's bare "Method not
found!". Triton's HTTP routes of the same extensions answer 501 with the same message,
instead of a 404 that reads like a typo. Which extensions, and why not:

- `cuda_shared_memory`: tensors passed through CUDA IPC memory the client registers;
  it needs a GPU in the server's process and is not implemented (system shared memory
  is: `tensorwire.v2.shm_regions`, with `--shared-memory system`). Only its register
  rpc and routes are refused here: status and unregister answer as a Triton without a
  GPU does (no regions; nothing to unregister), so that Triton's shared-memory examples,
  which unregister CUDA regions first, run unmodified;
- `trace`: Triton's own trace settings; tensorwire's tracing is OpenTelemetry's, set
  with `--tracing` and the `OTEL_*` variables;
- `logging`: Triton's log settings; tensorwire's are `--log-level` / `--log-format`.
"""

from __future__ import annotations

from dataclasses import dataclass

from ..errors import Unimplemented


@dataclass(frozen=True)
class Extension:
    """One extension tensorwire does not serve: its rpcs and Triton's HTTP routes."""

    name: str
    what: str
    instead: str
    rpcs: tuple[str, ...]
    #: (method, path) of Triton's HTTP routes
    routes: tuple[tuple[str, str], ...]

    def refusal(self) -> Unimplemented:
        return Unimplemented(f"{self.what} (Triton's '{self.name}' extension) is not "
                             f"supported by tensorwire: {self.instead}")


EXTENSIONS = (
    Extension("cuda_shared_memory", "CUDA shared memory",
              "it needs a GPU in the server; use system shared memory (--shared-memory "
              "system) or send tensors in the request (binary over HTTP, raw contents "
              "over gRPC)",
              ("CudaSharedMemoryRegister",),
              (("POST", "/v2/cudasharedmemory/register"),
               ("POST", "/v2/cudasharedmemory/region/{region}/register"))),
    Extension("trace", "trace settings",
              "tracing is OpenTelemetry's, set with --tracing and the OTEL_* variables",
              ("TraceSetting",),
              (("GET", "/v2/trace/setting"), ("POST", "/v2/trace/setting"),
               ("GET", "/v2/models/{model}/trace/setting"),
               ("POST", "/v2/models/{model}/trace/setting"))),
    Extension("logging", "log settings",
              "logging is set when the server starts: --log-level, --log-format, "
              "--access-log",
              ("LogSettings",),
              (("GET", "/v2/logging"), ("POST", "/v2/logging"))),
)

#: rpc name -> the extension it belongs to.
BY_RPC = {rpc: ext for ext in EXTENSIONS for rpc in ext.rpcs}
