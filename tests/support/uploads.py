"""One call with files, three ways: aiohttp multipart, curl -F, gRPC with tensorwire.v1.File.

`call(protocol, server, api, parts)` sends the same inputs over the chosen client and
returns a `Reply` whose `value` has one shape whatever the protocol (JSON values, text,
file bytes, PIL images, or a dict of those for multipart/model outputs), so a single
case table can say what every protocol must answer.
"""

from __future__ import annotations

import asyncio
import io
import json
import shutil
import subprocess
import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import aiohttp
import grpc

from tensorwire.codecs import MISSING

from .grpc_calls import GrpcCaller, error_locs

PROTOCOLS = ("aiohttp", "curl", "grpc")


@dataclass
class Up:
    """One input: a file part (`data` bytes) or a plain field (`value`)."""

    name: str
    data: bytes | None = None
    value: Any = None
    filename: str | None = None
    content_type: str | None = None

    @property
    def is_file(self) -> bool:
        return self.data is not None


def file(name: str, data: bytes, filename: str | None = None,
         content_type: str | None = None) -> Up:
    return Up(name, data=data, filename=filename, content_type=content_type)


def field(name: str, value: Any) -> Up:
    return Up(name, value=value)


@dataclass
class Reply:
    ok: bool
    #: HTTP status, or the gRPC status code name.
    status: int | str
    value: Any = None
    media_type: str | None = None
    headers: dict[str, str] | None = None
    error: str = ""
    locs: list[list[Any]] | None = None


def _as_text(value: Any) -> str:
    return value if isinstance(value, str) else json.dumps(value)


def _normalise_http(media_type: str, data: bytes) -> Any:
    from PIL import Image

    if media_type == "application/json":
        return json.loads(data)
    if media_type.startswith("text/"):
        return data.decode()
    if media_type.startswith("image/"):
        return Image.open(io.BytesIO(data))
    return data


async def _aiohttp(url: str, route: str, parts: list[Up], root_body: bool, files: bool
                   ) -> Reply:
    async with aiohttp.ClientSession() as session:
        if root_body:
            (up,) = parts
            headers = {"Content-Type": up.content_type} if up.content_type else {}
            resp = await session.post(url + route, data=up.data, headers=headers)
        elif not files:  # an API without files takes a JSON body
            resp = await session.post(url + route, json={up.name: up.value for up in parts})
        else:
            form = aiohttp.FormData(default_to_multipart=True)
            for up in parts:
                if up.is_file:
                    form.add_field(up.name, up.data, filename=up.filename or "blob",
                                   content_type=up.content_type or "application/octet-stream")
                else:
                    form.add_field(up.name, _as_text(up.value))
            resp = await session.post(url + route, data=form)
        async with resp:
            media = (resp.content_type or "").lower()
            headers = dict(resp.headers)
            if resp.status != 200:
                body = await resp.json()
                return Reply(False, resp.status, error=body["error"],
                             locs=[d["loc"] for d in body.get("detail", [])], headers=headers)
            if media == "multipart/form-data":
                value: dict[str, Any] = {}
                reader = aiohttp.MultipartReader.from_response(resp)
                while (part := await reader.next()) is not None:
                    data = bytes(await part.read())
                    item = _normalise_http(part.headers.get("Content-Type", ""), data)
                    if part.name in value:
                        prev = value[part.name]
                        value[part.name] = [*prev, item] if isinstance(prev, list) else [prev,
                                                                                         item]
                    else:
                        value[part.name] = item
                return Reply(True, 200, value, media, headers)
            return Reply(True, 200, _normalise_http(media, await resp.read()), media, headers)


def _curl(url: str, route: str, parts: list[Up], root_body: bool, files: bool) -> Reply:
    work = Path(tempfile.mkdtemp(prefix="tw-curl-"))
    try:
        args = ["curl", "-s", "-S", "-o", str(work / "out"), "-D", str(work / "head"),
                "-w", "%{http_code}"]
        if root_body:
            (up,) = parts
            (work / "body").write_bytes(up.data or b"")
            args += ["--data-binary", f"@{work / 'body'}"]
            if up.content_type:
                args += ["-H", f"Content-Type: {up.content_type}"]
        if not root_body and not files:
            args += ["-H", "Content-Type: application/json", "-d",
                     json.dumps({up.name: up.value for up in parts})]
        for i, up in enumerate(parts if not root_body and files else []):
            if up.is_file:
                path = work / f"in{i}"
                path.write_bytes(up.data or b"")
                spec = f"{up.name}=@{path}"
                if up.content_type:
                    spec += f";type={up.content_type}"
                spec += f";filename={up.filename or 'blob'}"
                args += ["-F", spec]
            else:
                args += ["--form-string", f"{up.name}={_as_text(up.value)}"]
        args.append(url + route)
        done = subprocess.run(args, capture_output=True, text=True, timeout=60, check=True)
        status = int(done.stdout.strip())
        headers: dict[str, str] = {}
        for line in (work / "head").read_text().splitlines()[1:]:
            key, _, val = line.partition(":")
            if val:
                headers[key.strip().lower()] = val.strip()
        media = headers.get("content-type", "").split(";")[0].strip().lower()
        data = (work / "out").read_bytes()
        if status != 200:
            body = json.loads(data)
            return Reply(False, status, error=body["error"],
                         locs=[d["loc"] for d in body.get("detail", [])], headers=headers)
        if media == "multipart/form-data":
            raise AssertionError("curl replies are checked through aiohttp for multipart")
        return Reply(True, 200, _normalise_http(media, data), media, headers)
    finally:
        shutil.rmtree(work, ignore_errors=True)


def grpc_request(caller: GrpcCaller, api: str, parts: list[Up]) -> Any:
    """The request message: plain fields through the API's codecs, files as File."""
    messages = caller.proto.messages[api]
    msg = messages.request({up.name: up.value for up in parts if not up.is_file})
    for up in parts:
        if up.is_file:
            target = getattr(msg, up.name)
            if hasattr(target, "add"):
                target = target.add()
            target.content = up.data
            target.content_type = up.content_type or ""
            target.filename = up.filename or ""
    return msg


def _normalise_grpc(value: Any) -> Any:
    """Files the gRPC client saved (caller-owned temp files) read back and removed."""
    if isinstance(value, Path):
        data = value.read_bytes()
        value.unlink()
        if value.parent.name.startswith("tensorwire-file-"):
            shutil.rmtree(value.parent, ignore_errors=True)
        return data
    if isinstance(value, dict):
        return {k: _normalise_grpc(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_normalise_grpc(v) for v in value]
    return value


def _grpc(server: Any, api: str, parts: list[Up]) -> Reply:
    with GrpcCaller(server.spec, server.grpc_target) as caller:
        try:
            value = caller.call(api, raw=grpc_request(caller, api, parts))
            return Reply(True, "OK", _normalise_grpc(None if value is MISSING else value))
        except grpc.RpcError as exc:
            return Reply(False, exc.code().name, error=exc.details() or "", locs=error_locs(exc))


def call(protocol: str, server: Any, api: str, parts: list[Up]) -> Reply:
    """Send `parts` to `api` over `protocol` ("aiohttp", "curl", "grpc", or "*-root")."""
    root = protocol.endswith("-root")
    protocol = protocol.removesuffix("-root")
    spec = server.spec.apis[api]
    if protocol == "grpc":
        return _grpc(server, api, parts)
    if protocol == "aiohttp":
        return asyncio.run(_aiohttp(server.http_url, spec.route, parts, root, spec.has_files))
    if protocol == "curl":
        return _curl(server.http_url, spec.route, parts, root, spec.has_files)
    raise ValueError(protocol)
