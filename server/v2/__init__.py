"""The Open Inference Protocol (KServe v2) transport: every API as a v2 model.

A third transport beside `http` and `grpc`, on their ports: `routes` adds the `/v2`
routes to the service's aiohttp app, `servicer` the `inference.GRPCInferenceService`
to its grpc.aio server; both convert their wire form and delegate to one
`repository.Repository` (models, health, metadata, infer), which derives a
`model.V2Model` from each APISpec and its codecs' `v2` facets. Like the other
transports it knows no data type: tensors are made and read by `tensorwire.wire.oip`
and turned into values by the facets.
"""

from __future__ import annotations

from .model import V2Model
from .repository import Repository
from .routes import V2Routes
from .servicer import V2Servicer

__all__ = ["Repository", "V2Model", "V2Routes", "V2Servicer"]
