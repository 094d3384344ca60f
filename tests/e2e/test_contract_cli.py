"""The contract commands as CI and operators run them: publish, lock, check, serve."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from tests.support.reflection import reflected_numbers
from tests.support.servers import ROOT, spawn_cli

V1 = '''
import typing as t
from annotated_types import Le
import tensorwire

@tensorwire.service(name="clidemo")
class CliDemo:
    @tensorwire.api
    def echo(self, x: t.Annotated[int, Le(10)], note: str = "") -> str:
        return note
'''

# An input inserted in the middle, and a new required one.
V2 = V1.replace('note: str = ""', 'extra: str = "", note: str = "", y: int = ...')

# `note` pinned to a number the published contract gives to `x`.
PINNED = V1.replace("import tensorwire", "import tensorwire\nfrom tensorwire.validators "
                    "import FieldNumber").replace(
    'note: str = ""', 'note: t.Annotated[str, FieldNumber(1)] = ""').replace(
    "x: t.Annotated[int, Le(10)]", "x: t.Annotated[int, Le(10), FieldNumber(2)]")


def tw(*args: str, cwd: Path = ROOT) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "tensorwire", *args], capture_output=True,
                          text=True, cwd=cwd, timeout=120)


def service(tmp_path: Path, source: str, name: str) -> str:
    path = tmp_path / f"{name}.py"
    path.write_text(source)
    return f"{path}:CliDemo"


@pytest.fixture(scope="module")
def published(tmp_path_factory: pytest.TempPathFactory) -> Path:
    tmp = tmp_path_factory.mktemp("cli")
    out = tw("proto", service(tmp, V1, "svc_v1"), "--out", str(tmp / "contract"))
    assert out.returncode == 0, out.stderr
    return tmp / "contract"


def test_publish_then_generate_against_it_is_byte_identical(published: Path, tmp_path):
    proto = published / "clidemo" / "clidemo.proto"
    assert (published / "clidemo" / "clidemo.schema.json").is_file()
    assert (published / "tensorwire" / "v1" / "types.proto").is_file()
    out = tw("proto", service(tmp_path, V1, "svc_same"), "--against", str(published))
    assert out.returncode == 0 and out.stdout == proto.read_text()
    check = tw("proto", service(tmp_path, V1, "svc_same2"), "--check", str(published))
    assert (check.returncode, check.stdout.splitlines()[-1]) == (0, "no breaking changes.")


def test_check_exits_1_naming_the_api_and_the_parameter(published: Path, tmp_path):
    target = service(tmp_path, V2, "svc_v2")
    out = tw("proto", target, "--check", str(published))
    assert out.returncode == 1, out.stderr
    assert 'echo: input "note": renumbered from 2 to 3' in out.stdout
    assert 'echo: input "y": new required input' in out.stdout
    # checked as served with the lock, only what the lock cannot help is left
    out = tw("proto", target, "--against", str(published), "--check", str(published))
    assert out.returncode == 1
    assert "renumbered" not in out.stdout
    assert 'echo: input "y": new required input' in out.stdout
    assert out.stdout.endswith("1 breaking change.\n")


@pytest.mark.parametrize(("source", "lock", "fragments"), [
    (V1, "nowhere", ["no published contract at", "nowhere"]),
    (PINNED, None, ["FieldNumber(", "contradicts the published contract", "x = 1"]),
])
def test_serve_with_a_bad_lock_stops_before_serving(published: Path, tmp_path, source,
                                                    lock, fragments):
    target = service(tmp_path, source, "svc_bad")
    out = tw("serve", target, "--proto-lock", lock or str(published), "--http-port", "0",
             "--grpc-port", "0")
    assert out.returncode == 2
    for fragment in fragments:
        assert fragment in out.stderr
    assert "Traceback" not in out.stderr


def test_serve_takes_the_lock_from_the_environment(published: Path, tmp_path):
    target = service(tmp_path, V2.replace("y: int = ...", "y: int = 0"), "svc_served")
    server = spawn_cli(target, env={"TENSORWIRE_PROTO_LOCK": str(published)})
    try:
        assert reflected_numbers(server.grpc_target, "clidemo.EchoRequest") == {
            "x": 1, "extra": 3, "note": 2, "y": 4}
    finally:
        server.stop()
