"""`tensorwire serve --loop`: both transports answer on each loop, one worker or several,
the start-up line names the loop, and asking for a loop that is not installed is a
usage error before anything starts."""

from __future__ import annotations

import time

import grpc
import pytest

import tensorwire
from examples.quickstart import Quickstart
from tensorwire.ops import cli, loops
from tests.support.grpc_calls import GrpcCaller
from tests.support.http_calls import post
from tests.support.servers import spawn_cli

pytest.importorskip("uvloop")
pytestmark = pytest.mark.slow
SPEC = tensorwire.get_service_spec(Quickstart)


def _start_up_line(server) -> str:
    deadline = time.monotonic() + 60
    while "tensorwire serving" not in server.output():
        assert server.process is not None and server.process.poll() is None, \
            server.output()
        assert time.monotonic() < deadline, server.output()
        time.sleep(0.05)
    (line,) = [li for li in server.output().splitlines() if "tensorwire serving" in li]
    return line


def _both_protocols_answer(server) -> None:
    reply = post(server.http_url + "/summarize", {"text": "one loop or another"})
    assert reply.json() == {"summary": "one loop or another", "words": 4}
    with GrpcCaller(SPEC, server.grpc_target) as caller:
        assert caller.call("upper", {"text": "x"}) == "X"
        with pytest.raises(grpc.RpcError) as err:  # a validation error on this loop too
            caller.call("summarize", {})
        assert err.value.code() == grpc.StatusCode.INVALID_ARGUMENT


@pytest.mark.parametrize(("choice", "expected"), [("asyncio", "asyncio"),
                                                  ("uvloop", "uvloop"),
                                                  ("auto", "uvloop")])
def test_each_loop_serves_both_protocols(choice: str, expected: str) -> None:
    server = spawn_cli("examples.quickstart:Quickstart", "--loop", choice,
                       drain_output=True)
    try:
        assert _start_up_line(server).endswith(f"loop {expected}")
        _both_protocols_answer(server)
    finally:
        server.stop()
    assert server.process is not None and server.process.returncode == 0


def test_workers_run_on_the_loop_asked_for() -> None:
    server = spawn_cli("examples.quickstart:Quickstart", "--workers", "2",
                       "--loop", "uvloop", drain_output=True)
    try:
        _both_protocols_answer(server)
        deadline = time.monotonic() + 60
        while server.output().count(" ready (pid ") < 2:
            assert time.monotonic() < deadline, server.output()
            time.sleep(0.05)
    finally:
        server.stop()
    lines = [li for li in server.output().splitlines() if " ready (pid " in li]
    assert len(lines) == 2 and all(li.endswith(", loop uvloop)") for li in lines), lines


def test_uvloop_not_installed_is_a_usage_error(monkeypatch: pytest.MonkeyPatch,
                                               capsys: pytest.CaptureFixture[str]) -> None:
    monkeypatch.setattr(loops, "uvloop_installed", lambda: False)
    code = cli.main(["serve", "examples.quickstart:Quickstart", "--loop", "uvloop",
                     "--http-port", "0", "--grpc-port", "0"])
    assert code == 2
    assert "pip install 'tensorwire[uvloop]'" in capsys.readouterr().err
