"""Files and images end to end: every example API over aiohttp, curl and gRPC.

One case table drives all three clients; each case says what the answer must be in the
protocol-neutral shape `tests.support.uploads` gives. Bad inputs get their own table;
after each one the server still answers and no request directory is left behind.
"""

from __future__ import annotations

import email.parser
import email.policy
import io
import json
import subprocess
import time
import typing as t
import urllib.request
from collections.abc import Callable
from pathlib import Path

import grpc
import pytest
from PIL import Image

import tensorwire
from examples.audio import AudioFiles
from examples.images import ImageTools, draw_digit
from tests.support.grpc_calls import GrpcCaller, error_locs
from tests.support.servers import serving
from tests.support.uploads import PROTOCOLS, Reply, Up, call, field, file

MiB = 1024 * 1024


def encoded(image: Image.Image, fmt: str) -> bytes:
    buf = io.BytesIO()
    image.save(buf, fmt)
    return buf.getvalue()


def mp3(frames: int = 10) -> bytes:
    """An ID3 tag and MPEG-1 Layer III frames (128 kbit/s, 44.1 kHz, silent payload)."""
    return b"ID3\x03\x00\x00\x00\x00\x00\x00" + (b"\xff\xfb\x90\x64" + b"\x00" * 413) * frames


PNG = encoded(Image.new("RGB", (100, 50), "red"), "PNG")
JPEG = encoded(Image.new("RGB", (40, 30), "green"), "JPEG")
DIGIT7 = encoded(draw_digit(7).convert("RGB"), "JPEG")
BOMB = encoded(Image.new("1", (6_000, 6_000)), "PNG")  # 36 Mpx in a few KiB
MAX_PIXELS = 10_000_000


@pytest.fixture(scope="module")
def temp_root(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("request-dirs")


@pytest.fixture(scope="module")
def audio(temp_root: Path):
    with serving(AudioFiles, temp_dir=str(temp_root / "audio")) as server:
        yield server


@pytest.fixture(scope="module")
def images(temp_root: Path):
    with serving(ImageTools, temp_dir=str(temp_root / "images"), max_request_size=4 * MiB,
                 max_part_size=1 * MiB, max_image_pixels=MAX_PIXELS) as server:
        yield server


def leftovers(root: Path) -> list[Path]:
    """Request directories (or files) still under a server's temp root."""
    if not root.exists():
        return []
    return [p for base in root.iterdir() for p in base.iterdir()]


def assert_clean(root: Path, timeout: float = 5.0) -> None:
    deadline = time.monotonic() + timeout
    while (left := leftovers(root)) and time.monotonic() < deadline:
        time.sleep(0.02)
    assert left == [], f"temp files left behind: {left}"


def assert_healthy(server: t.Any) -> None:
    with urllib.request.urlopen(server.http_url + "/readyz", timeout=5) as r:
        assert r.status == 200
    ok = call("grpc", server, *HEALTH_CALLS[server.spec.name])
    assert ok.ok, ok


HEALTH_CALLS = {
    "AudioFiles": ("speak", [field("text", "ok")]),
    "ImageTools": ("upload_image", [file("image", PNG, "p.png", "image/png")]),
}


def curl_multipart(server: t.Any, api: str, parts: list[Up], work: Path
                   ) -> tuple[Reply, list[tuple[str, str, bytes]]]:
    """POST `parts` with curl -F to an API whose answer is multipart/form-data.

    The body comes back as bytes (`-o`) and is parsed with the stdlib email parser under
    the response's Content-Type; the Reply's value has the shape `call` gives (one entry
    per part, images as PIL images), the list the raw (name, media type, bytes) of each.
    """
    args = ["curl", "-s", "-S", "-o", str(work / "out"), "-w", "%{http_code}\n%{content_type}"]
    for i, up in enumerate(parts):
        assert up.is_file, "only file parts here"
        path = work / f"in{i}"
        path.write_bytes(up.data or b"")
        spec = f"{up.name}=@{path};filename={up.filename or 'blob'}"
        if up.content_type:
            spec += f";type={up.content_type}"
        args += ["-F", spec]
    args.append(server.http_url + server.spec.apis[api].route)
    done = subprocess.run(args, capture_output=True, text=True, timeout=60, check=True)
    status, content_type = done.stdout.split("\n", 1)
    assert status == "200", done.stdout
    media = content_type.split(";")[0].strip().lower()
    assert media == "multipart/form-data", content_type
    body = (work / "out").read_bytes()
    message = email.parser.BytesParser(policy=email.policy.HTTP).parsebytes(
        b"Content-Type: " + content_type.encode() + b"\r\n\r\n" + body)
    assert message.is_multipart() and not message.defects, message.defects
    raw: list[tuple[str, str, bytes]] = []
    value: dict[str, t.Any] = {}
    for part in message.iter_parts():
        name = part.get_param("name", header="content-disposition")
        data = part.get_payload(decode=True)
        assert int(part["Content-Length"]) == len(data)  # the bytes came through whole
        raw.append((name, part.get_content_type(), data))
        if part.get_content_type() == "application/json":
            value[name] = json.loads(data)
        else:
            value[name] = Image.open(io.BytesIO(data))
    return Reply(True, 200, value, media), raw


# ---------------------------------------------------------------------- good calls

def _image_size(size: tuple[int, int], fmt: str) -> Callable[[Reply], None]:
    def check(reply: Reply) -> None:
        assert isinstance(reply.value, Image.Image), reply
        assert reply.value.size == size and reply.value.format == fmt
    return check


def _equals(expected: t.Any) -> Callable[[Reply], None]:
    def check(reply: Reply) -> None:
        assert reply.value == expected
    return check


def _wav(reply: Reply) -> None:
    data = reply.value
    assert data[:4] == b"RIFF" and data[8:12] == b"WAVE"
    assert len(data) == 44 + 2 * 3 * (8000 // 20)  # header + 3 tones of 50 ms, 16-bit
    if reply.headers is not None:  # HTTP: a file response
        headers = {k.lower(): v for k, v in reply.headers.items()}
        assert headers["content-type"] == "audio/wav"
        assert headers["content-disposition"] == 'attachment; filename="speech.wav"'


def _appended(reply: Reply) -> None:
    data = reply.value if isinstance(reply.value, bytes) else reply.value.encode()
    assert data == b"first line\nsecond line\n"
    if reply.headers is not None:
        headers = {k.lower(): v for k, v in reply.headers.items()}
        assert headers["content-disposition"] == 'attachment; filename="notes.txt"'


def _thumbnails(reply: Reply) -> None:
    value = reply.value
    assert set(value) == {"small", "large", "sizes"}
    assert value["small"].size == (32, 16) and value["large"].size == (100, 50)
    assert value["sizes"] == {"small": [32, 16], "large": [100, 50]}


GOOD = {
    # api, server, parts, check, HTTP root body?
    "transcribe": ("audio", "transcribe",
                   [file("audio", mp3(), "speech.mp3", "audio/mpeg")],
                   _equals("10 MP3 frames at 128 kbit/s: 0.26 s of audio")),
    "transcribe-no-type": ("audio", "transcribe", [file("audio", mp3(20))],
                           _equals("20 MP3 frames at 128 kbit/s: 0.52 s of audio")),
    "speak": ("audio", "speak", [field("text", "abc")], _wav),
    "append": ("audio", "append",
               [file("file", b"first line", "notes.txt", "text/plain"),
                field("line", "second line")], _appended),
    "resize": ("images", "resize",
               [file("image", JPEG, "photo.jpg", "image/jpeg"), field("width", 20),
                field("height", 10)], _image_size((20, 10), "JPEG")),
    "predict_digit": ("images", "predict_digit",
                      [file("image", DIGIT7, "seven.jpg", "image/jpeg")], _equals(7)),
    "upload_image": ("images", "upload_image", [file("image", PNG, "photo.png", "image/png")],
                     _equals({"width": 100, "height": 50, "mode": "RGB", "format": "PNG"})),
    "describe": ("images", "describe",
                 [file("image", JPEG, "p.jpg"), field("caption", "a green box"),
                  field("tags", ["green", "box"])],
                 _equals({"width": 40, "height": 30, "mode": "RGB", "format": "JPEG",
                          "caption": "a green box", "tags": ["green", "box"]})),
    "sizes": ("images", "sizes",
              [file("images", PNG, "a.png"), file("images", JPEG, "b.jpg"),
               file("images", DIGIT7, "c.jpg")],
              _equals([[100, 50], [40, 30], [28, 28]])),
    "file_sizes": ("images", "file_sizes",
                   [file("files", PNG, "a.png"), file("files", b"hello", "b.txt")],
                   _equals([[".png", len(PNG)], [".txt", 5]])),
    "thumbnails": ("images", "thumbnails", [file("image", PNG, "p.png")], _thumbnails),
}


@pytest.mark.parametrize("protocol", PROTOCOLS)
@pytest.mark.parametrize("case", list(GOOD))
def test_example_api(protocol: str, case: str, request: pytest.FixtureRequest,
                     temp_root: Path, tmp_path: Path) -> None:
    server_name, api, parts, check = GOOD[case]
    server = request.getfixturevalue(server_name)
    if protocol == "curl" and case == "thumbnails":  # a multipart/form-data reply
        reply, _ = curl_multipart(server, api, parts, tmp_path)
    else:
        reply = call(protocol, server, api, parts)
    assert reply.ok, reply
    if protocol == "grpc" and case == "thumbnails":
        reply.value["sizes"] = {k: [int(x) for x in v] for k, v in reply.value["sizes"].items()}
    elif protocol == "grpc" and isinstance(reply.value, list):
        reply.value = [[int(x) if isinstance(x, float) else x for x in row]
                       for row in reply.value]
    elif protocol == "grpc" and isinstance(reply.value, dict):
        reply.value = {k: int(v) if isinstance(v, float) else v for k, v in reply.value.items()}
    check(reply)
    assert_clean(temp_root / server_name)


def _mirrored(reply: Reply) -> None:
    value = reply.value
    if isinstance(value, bytes):  # gRPC: the bytes field
        value = Image.open(io.BytesIO(value))
    else:
        assert reply.media_type == "image/png"
    assert value.format == "PNG" and value.size == (100, 50)


def _sha(data: bytes, suffix: str) -> Callable[[Reply], None]:
    import hashlib

    def check(reply: Reply) -> None:
        assert reply.value == {"sha256": hashlib.sha256(data).hexdigest(), "size": len(data),
                               "suffix": suffix}
    return check


ROOT = {
    "image": ("images", "upload_image", [file("image", JPEG, None, "image/jpeg")],
              _equals({"width": 40, "height": 30, "mode": "RGB", "format": "JPEG"})),
    # curl --data-binary without -H sends form-urlencoded: the bytes still tell.
    "image, no type": ("images", "upload_image", [file("image", PNG)],
                       _equals({"width": 100, "height": 50, "mode": "RGB", "format": "PNG"})),
    "path": ("audio", "checksum", [file("file", mp3(), None, "audio/mpeg")],
             _sha(mp3(), ".mp3")),
    "path, unknown type": ("audio", "checksum", [file("file", b"\x00\x01" * 5000)],
                           _sha(b"\x00\x01" * 5000, "")),
    "bytes with a content type": ("images", "mirror_png", [file("data", PNG, None, "image/png")],
                                  _mirrored),
}


@pytest.mark.parametrize("protocol", ["aiohttp-root", "curl-root", "grpc"])
@pytest.mark.parametrize("case", list(ROOT))
def test_root_input_is_the_body(protocol: str, case: str, request: pytest.FixtureRequest,
                                temp_root: Path) -> None:
    server_name, api, parts, check = ROOT[case]
    server = request.getfixturevalue(server_name)
    if protocol == "grpc" and api == "mirror_png":
        with GrpcCaller(server.spec, server.grpc_target) as caller:
            reply = Reply(True, "OK", caller.call(api, {"data": parts[0].data}))
    else:
        reply = call(protocol, server, api, parts)
    assert reply.ok, reply
    check(reply)
    assert_clean(temp_root / server_name)


def test_root_bytes_of_another_type_is_415(images) -> None:
    reply = call("aiohttp-root", images, "mirror_png", [file("data", JPEG, None, "image/png")])
    assert reply.status == 415 and reply.locs == [["data"]], reply
    with GrpcCaller(images.spec, images.grpc_target) as caller:
        with pytest.raises(grpc.RpcError) as err:
            caller.call("mirror_png", {"data": JPEG})
        assert err.value.code() == grpc.StatusCode.INVALID_ARGUMENT
        assert error_locs(err.value) == [["data"]]


def test_readme_curl_command_works(images, tmp_path: Path) -> None:
    photo = tmp_path / "photo.png"
    photo.write_bytes(PNG)
    out = subprocess.run(
        ["curl", "-s", "--data-binary", f"@{photo}", "-H", "Content-Type: image/png",
         f"{images.http_url}/upload_image"], capture_output=True, text=True, check=True)
    assert json.loads(out.stdout) == {"width": 100, "height": 50, "mode": "RGB",
                                      "format": "PNG"}


def test_multipart_response_is_one_part_per_field(images) -> None:
    reply = call("aiohttp", images, "thumbnails", [file("image", JPEG, "p.jpg")])
    assert reply.ok
    assert reply.media_type == "multipart/form-data"
    assert reply.value["small"].format == "JPEG"  # outputs keep the input's format
    assert reply.value["sizes"] == {"small": [32, 24], "large": [40, 30]}


def test_multipart_response_over_curl_is_what_aiohttp_sees(images, tmp_path: Path) -> None:
    parts = [file("image", JPEG, "p.jpg", "image/jpeg")]
    by_curl, raw = curl_multipart(images, "thumbnails", parts, tmp_path)
    by_aiohttp = call("aiohttp", images, "thumbnails", parts)
    assert by_aiohttp.ok and by_aiohttp.media_type == by_curl.media_type
    assert [(name, media) for name, media, _ in raw] == [
        ("small", "image/jpeg"), ("large", "image/jpeg"), ("sizes", "application/json")]
    assert list(by_curl.value) == list(by_aiohttp.value)  # same parts, same order
    for name in ("small", "large"):
        a, b = by_curl.value[name], by_aiohttp.value[name]
        assert (a.format, a.size, a.mode) == (b.format, b.size, b.mode)
        assert a.tobytes() == b.tobytes()  # same pixels
    assert by_curl.value["sizes"] == by_aiohttp.value["sizes"] == {"small": [32, 24],
                                                                  "large": [40, 30]}


# ---------------------------------------------------------------------- bad inputs

BAD = {
    # case: server, api, parts, HTTP status, gRPC code, field in the error
    "wrong media type": ("audio", "transcribe", [file("audio", PNG, "a.png", "image/png")],
                         415, "INVALID_ARGUMENT", "audio"),
    "spoofed extension": ("images", "predict_digit",
                          [file("image", PNG, "digit.jpg", "image/jpeg")],
                          415, "INVALID_ARGUMENT", "image"),
    "pdf as mp3": ("audio", "transcribe", [file("audio", b"%PDF-1.4\n%...", "talk.mp3")],
                   415, "INVALID_ARGUMENT", "audio"),
    "1-byte image": ("images", "resize",
                     [file("image", b"x", "tiny.png", "image/png"), field("width", 2),
                      field("height", 2)], 415, "INVALID_ARGUMENT", "image"),
    "1-byte image, any type": ("images", "describe",
                               [file("image", b"\x00", "tiny.png"), field("caption", "x")],
                               400, "INVALID_ARGUMENT", "image"),
    "truncated image": ("images", "upload_image", [file("image", PNG[:70], "cut.png")],
                        400, "INVALID_ARGUMENT", "image"),
    "decompression bomb": ("images", "upload_image", [file("image", BOMB, "bomb.png")],
                           400, "INVALID_ARGUMENT", "image"),
    "missing part": ("images", "describe", [field("caption", "no image")],
                     400, "INVALID_ARGUMENT", "image"),
    "missing file in a list": ("images", "sizes", [], 400, "INVALID_ARGUMENT", "images"),
    "not an image in a list": ("images", "sizes",
                               [file("images", PNG, "a.png"), file("images", b"nope", "b")],
                               400, "INVALID_ARGUMENT", "images"),
    "bad field beside a file": ("images", "resize",
                                [file("image", PNG, "a.png"), field("width", 0),
                                 field("height", 5)], 400, "INVALID_ARGUMENT", "width"),
}


@pytest.mark.parametrize("protocol", ["aiohttp", "grpc"])
@pytest.mark.parametrize("case", list(BAD))
def test_bad_input(protocol: str, case: str, request: pytest.FixtureRequest,
                   temp_root: Path) -> None:
    server_name, api, parts, status, code, loc = BAD[case]
    server = request.getfixturevalue(server_name)
    reply = call(protocol, server, api, parts)
    assert not reply.ok, reply
    assert reply.status == (status if protocol == "aiohttp" else code), reply
    assert reply.locs and reply.locs[0][0] == loc, reply
    assert reply.error
    assert_healthy(server)
    assert_clean(temp_root / server_name)


def test_duplicated_and_unknown_parts(images, temp_root: Path) -> None:
    reply = call("aiohttp", images, "describe",
                 [file("image", PNG, "a.png"), file("image", PNG, "b.png"),
                  field("caption", "x")])
    assert (reply.status, reply.locs) == (400, [["image"]]) and "duplicated" in reply.error
    reply = call("aiohttp", images, "describe",
                 [file("image", PNG, "a.png"), field("caption", "x"), field("colour", "red")])
    assert (reply.status, reply.locs) == (400, [["colour"]])
    assert_healthy(images)
    assert_clean(temp_root / "images")


def test_files_cannot_be_sent_as_json(images) -> None:
    req = urllib.request.Request(images.http_url + "/describe",
                                 data=b'{"image": "/etc/passwd", "caption": "x"}',
                                 headers={"Content-Type": "application/json"})
    with pytest.raises(urllib.error.HTTPError) as err:
        urllib.request.urlopen(req, timeout=5)
    assert err.value.code == 415


@pytest.mark.parametrize("protocol", ["aiohttp", "grpc"])
def test_traversal_filename_is_only_metadata(protocol: str, audio, images,
                                             temp_root: Path) -> None:
    reply = call(protocol, images, "file_sizes",
                 [file("files", b"root:x:0:0", "../../etc/passwd"),
                  file("files", b"evil", "..\\..\\..\\boot.ini")])
    assert reply.ok, reply
    got = reply.value
    if protocol == "grpc":
        got = [[s, int(n)] for s, n in got]
    assert got == [[".txt", 10], [".ini", 4]]  # extensions follow the content
    reply = call(protocol, audio, "append",
                 [file("file", b"x", "../../../../tmp/pwned.txt", "text/plain"),
                  field("line", "y")])
    assert reply.ok, reply
    assert reply.value in ("x\ny\n", b"x\ny\n")
    assert not Path("/tmp/pwned.txt").exists()
    assert_clean(temp_root / "images")
    assert_clean(temp_root / "audio")


def test_oversized_part_and_request(images, temp_root: Path) -> None:
    big = b"\x00" * (MiB + 10)
    reply = call("aiohttp", images, "file_sizes", [file("files", big, "big.bin")])
    assert reply.status == 413 and "at most 1048576 bytes" in reply.error, reply
    huge = b"\x00" * (5 * MiB)  # past max_request_size: refused by size before reading
    reply = call("aiohttp", images, "file_sizes", [file("files", huge, "huge.bin")])
    assert reply.status == 413
    reply = call("grpc", images, "file_sizes", [file("files", huge, "huge.bin")])
    assert reply.status == "RESOURCE_EXHAUSTED"
    assert_healthy(images)
    assert_clean(temp_root / "images")


def test_too_many_parts(images) -> None:
    parts = [file("files", b"x", f"{i}.txt") for i in range(70)]
    reply = call("aiohttp", images, "file_sizes", parts)
    assert reply.status == 413 and "parts" in reply.error


# ---------------------------------------------------------------------- contract

def _get_json(url: str) -> dict[str, t.Any]:
    with urllib.request.urlopen(url, timeout=5) as r:
        return json.loads(r.read())


def test_schema_json_marks_file_fields(images, audio) -> None:
    routes = {r["name"]: r for r in _get_json(images.http_url + "/schema.json")["routes"]}
    props = routes["describe"]["input"]["properties"]
    assert props["image"]["type"] == "file" and props["image"]["format"] == "image"
    assert props["caption"]["type"] == "string"
    assert routes["sizes"]["input"]["properties"]["images"]["items"]["type"] == "file"
    assert routes["predict_digit"]["input"]["properties"]["image"]["content_type"] == \
        "image/jpeg"
    assert routes["upload_image"]["input"]["root_input"] is True
    assert routes["thumbnails"]["output"]["media_type"] == "multipart/form-data"
    audio_routes = {r["name"]: r for r in _get_json(audio.http_url + "/schema.json")["routes"]}
    assert audio_routes["transcribe"]["input"]["properties"]["audio"] == {
        "type": "file", "format": "audio", "content_type": "audio/mp3", "title": "Audio"}
    assert audio_routes["speak"]["output"]["media_type"] == "audio/wav"


def test_openapi_shows_multipart_with_binary_fields(images) -> None:
    doc = _get_json(images.http_url + "/docs.json")
    body = doc["paths"]["/describe"]["post"]["requestBody"]["content"]
    media = body["multipart/form-data"]
    image = media["schema"]["properties"]["image"]
    assert (image["type"], image["format"]) == ("string", "binary")
    assert media["encoding"]["tags"] == {"contentType": "application/json"}
    sizes = doc["paths"]["/sizes"]["post"]["requestBody"]["content"]["multipart/form-data"]
    assert sizes["schema"]["properties"]["images"]["items"]["format"] == "binary"
    assert sizes["encoding"]["images"] == {"contentType": "image/*"}
    root = doc["paths"]["/upload_image"]["post"]["requestBody"]["content"]
    assert root == {"image/*": {"schema": {"type": "string", "format": "binary"}}}
    thumbs = doc["paths"]["/thumbnails"]["post"]["responses"]["200"]["content"]
    schema = thumbs["multipart/form-data"]["schema"]
    if "$ref" in schema:  # a named model output may be a component
        schema = doc["components"]["schemas"][schema["$ref"].rsplit("/", 1)[-1]]
    assert schema["properties"]["small"]["format"] == "binary"
    assert '"type": "file"' not in json.dumps(doc)  # schema.json's form, not OpenAPI's


@pytest.mark.slow
def test_examples_run_from_the_cli(tmp_path: Path) -> None:
    from tests.support.servers import spawn_cli

    photo = tmp_path / "photo.png"
    photo.write_bytes(PNG)
    server = spawn_cli("examples.images:ImageTools",
                       env={"TENSORWIRE_TEMP_DIR": str(tmp_path / "tmp")})
    try:
        out = subprocess.run(
            ["curl", "-s", "--data-binary", f"@{photo}", "-H", "Content-Type: image/png",
             f"{server.http_url}/upload_image"], capture_output=True, text=True, check=True)
        assert json.loads(out.stdout)["format"] == "PNG"
        server.spec = tensorwire.get_service_spec(ImageTools)
        assert call("grpc", server, "predict_digit",
                    [file("image", DIGIT7, "7.jpg", "image/jpeg")]).value == 7
        assert_clean(tmp_path / "tmp")
    finally:
        server.stop()
    assert list((tmp_path / "tmp").iterdir()) == []  # the worker removed its base dir
