"""An HTTP inference request's body, read the cheapest way its headers allow.

A body in Triton's binary extension (`Inference-Header-Content-Length`) with a plain
Content-Length is read as it arrives: the JSON header, its sizes checked against the
body's length, then every binary input's bytes straight into one buffer lent by the
process's pool (`tensorwire.wire.buffers`), which the inputs' arrays are views of
(`tensorwire.wire.oip.read_http_infer_request`). A small body (up to
`READ_WHOLE_UP_TO`) and any other body (all JSON; chunked;
gzip/deflate, inflated in bounded steps within the size limit, the header length
counting inflated bytes) is read whole within the limit and parsed as before.
"""

from __future__ import annotations

from aiohttp import web

from ..http.body import read_body
from ..http.parts import BodyPart
from ..wire.buffers import POOL
from ..wire.oip import (
    INFERENCE_HEADER_CONTENT_LENGTH,
    HttpInferRequest,
    RawInput,
    parse_http_infer_request,
    read_http_infer_request,
)

#: Bodies up to this size are read whole (one read, no buffer from the pool): reading
#: them as they arrive saves no copy worth the steps (10 more Python calls a request).
READ_WHOLE_UP_TO = 1 << 16


async def read_infer_request(request: web.Request, max_size: int,
                             raw_input: RawInput | None) -> HttpInferRequest:
    """The parsed inference request of `request` (see the module docstring);
    `raw_input` is the model's only input, for a raw body (None: refused)."""
    header_length = request.headers.get(INFERENCE_HEADER_CONTENT_LENGTH)
    length = request.content_length
    if header_length is not None and length is not None and length > READ_WHOLE_UP_TO:
        body = BodyPart(request, "", max_size)
        if body.length is not None:
            return await read_http_infer_request(body, header_length, take=POOL.take,
                                                 raw_input=raw_input)
    return parse_http_infer_request(await read_body(request, max_size), header_length,
                                    raw_input=raw_input)
