"""The bare aiohttp baseline: what a careful user writes by hand for the same APIs.

`python -m bench.support.baselines.bare_http --port 8001`. Validation is the same pydantic model
(`model_validate_json` straight from the body bytes), responses are orjson; no access
log. `def` handlers run in an 8-thread pool, as tensorwire's do.
"""

from __future__ import annotations

import argparse
import asyncio
import functools
from concurrent.futures import ThreadPoolExecutor

import orjson
from aiohttp import web
from pydantic import BaseModel, ConfigDict, Field, ValidationError

from bench.support.baselines import new_loop
from bench.support.model import TOKEN, PredictRequest, classify

_executor = ThreadPoolExecutor(max_workers=8, thread_name_prefix="bare-api")
_SSE_HEADERS = {"Content-Type": "text/event-stream; charset=utf-8",
                "Cache-Control": "no-cache"}


async def tokens(n: int):
    for _ in range(n):
        yield TOKEN


def tokens_sync(n: int):
    for _ in range(n):
        yield TOKEN


class TokensRequest(BaseModel):
    model_config = ConfigDict(extra="forbid")
    n: int = Field(16, ge=1, le=1_000_000)


def _bad_request(exc: ValidationError) -> web.Response:
    detail = exc.errors(include_url=False, include_input=False, include_context=False)
    return web.Response(status=400, body=orjson.dumps({"error": "invalid", "detail": detail}),
                        content_type="application/json")


def _predict(req: PredictRequest) -> bytes:
    p = classify(req.sepal_length, req.sepal_width, req.petal_length, req.petal_width)
    return orjson.dumps({"label": p.label, "score": p.score})


async def predict(request: web.Request) -> web.Response:
    try:
        req = PredictRequest.model_validate_json(await request.read())
    except ValidationError as exc:
        return _bad_request(exc)
    return web.Response(body=_predict(req), content_type="application/json")


async def predict_sync(request: web.Request) -> web.Response:
    try:
        req = PredictRequest.model_validate_json(await request.read())
    except ValidationError as exc:
        return _bad_request(exc)
    loop = asyncio.get_running_loop()
    body = await loop.run_in_executor(_executor, _predict, req)
    return web.Response(body=body, content_type="application/json")


async def _stream(request: web.Request, sync: bool) -> web.StreamResponse:
    try:
        req = TokensRequest.model_validate_json(await request.read())
    except ValidationError as exc:
        return _bad_request(exc)
    resp = web.StreamResponse(headers=_SSE_HEADERS)
    await resp.prepare(request)
    if sync:  # a `def` generator: each next() in the pool, as tensorwire drives it
        loop = asyncio.get_running_loop()
        gen = tokens_sync(req.n)
        while (tok := await loop.run_in_executor(_executor, next, gen, None)) is not None:
            await resp.write(b"data: " + tok.encode() + b"\n\n")
    else:
        async for tok in tokens(req.n):
            await resp.write(b"data: " + tok.encode() + b"\n\n")
    await resp.write_eof()
    return resp


async def readyz(_: web.Request) -> web.Response:
    return web.Response(body=b'{"status":"ready"}', content_type="application/json")


def make_app() -> web.Application:
    app = web.Application()
    app.router.add_post("/predict", predict)
    app.router.add_post("/predict_sync", predict_sync)
    app.router.add_post("/tokens", functools.partial(_stream, sync=False))
    app.router.add_post("/tokens_sync", functools.partial(_stream, sync=True))
    app.router.add_get("/readyz", readyz)
    return app


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--port", type=int, required=True)
    parser.add_argument("--loop", choices=["asyncio", "uvloop"], default="asyncio")
    args = parser.parse_args()
    loop = new_loop(args.loop)
    asyncio.set_event_loop(loop)
    web.run_app(make_app(), host=args.host, port=args.port, access_log=None, print=None,
                loop=loop)


if __name__ == "__main__":
    main()
