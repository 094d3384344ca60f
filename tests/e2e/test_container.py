"""The container's commands, run without Docker: build the wheel as stage 1 does,
install it into a fresh venv as stage 2 does, then run the image's ENTRYPOINT and
HEALTHCHECK exactly as written in docker/Dockerfile."""

from __future__ import annotations

import contextlib
import os
import shutil
import signal
import subprocess
import sys
import sysconfig
from pathlib import Path

import pytest

from tests.support.dockerfile import parse
from tests.support.ops_http import post
from tests.support.servers import ROOT, free_ports, wait_ready

pytestmark = pytest.mark.slow
DOCKERFILE = ROOT / "docker" / "Dockerfile"


def run(cmd: list[str], **kw) -> subprocess.CompletedProcess:
    proc = subprocess.run(cmd, capture_output=True, text=True, timeout=300, **kw)
    assert proc.returncode == 0, f"{cmd}:\n{proc.stdout}\n{proc.stderr}"
    return proc


@pytest.fixture(scope="module")
def image(tmp_path_factory) -> dict:
    """The "image": a venv holding only the wheel, plus /app with the service folder."""
    tmp = tmp_path_factory.mktemp("image")
    _, stages = parse(DOCKERFILE)
    build, final = stages[0], stages[-1]

    # stage 1: COPY the build context's files, then build the wheel
    src = tmp / "src"
    src.mkdir()
    for sources, dest in build.copies():  # COPY a b ./   |   COPY server ./server
        for name in sources:
            target = src / name if dest.endswith("/") else src / dest
            if (ROOT / name).is_dir():
                shutil.copytree(ROOT / name, target,
                                ignore=shutil.ignore_patterns("__pycache__"))
            else:
                shutil.copy2(ROOT / name, target)
    (build_cmd,) = [r for r in build.all("RUN") if "python -m build" in r]
    assert build_cmd.startswith("python -m build --wheel --outdir")
    # offline here: no isolated build env, the test venv's setuptools builds it
    run([sys.executable, "-m", "build", "--wheel", "--no-isolation",
         "--skip-dependency-check", "--outdir", str(tmp / "wheels")], cwd=src)
    (wheel,) = (tmp / "wheels").glob("tensorwire-*.whl")

    # stage 2: a venv with the wheel; dependencies come from this test's environment
    venv = tmp / "venv"
    run([sys.executable, "-m", "venv", "--without-pip", str(venv)])
    python = venv / "bin" / "python"
    site = Path(run([str(python), "-c", "import sysconfig; print(sysconfig.get_paths()"
                     "['purelib'])"]).stdout.strip())
    deps = [p for p in sys.path if p.endswith("site-packages") and Path(p).is_dir()]
    deps.append(sysconfig.get_paths()["purelib"])
    (site / "_test_deps.pth").write_text("\n".join(dict.fromkeys(deps)) + "\n")
    run([sys.executable, "-m", "pip", "--python", str(python), "install", "--no-deps",
         "--no-index", "--quiet", str(wheel)])

    app = tmp / "app"
    app.mkdir()
    args = final.args
    for sources, dest in final.copies():
        if dest.startswith("/app"):
            (name,) = sources
            folder = name.replace("${SERVICE_DIR}", args["SERVICE_DIR"])
            shutil.copytree(ROOT / folder, app / folder,
                            ignore=shutil.ignore_patterns("__pycache__"))

    env = final.env()
    env["PATH"] = env["PATH"].replace("/opt/tensorwire/bin", str(venv / "bin")).replace(
        "$PATH", "/usr/bin:/bin")
    env["HOME"] = str(tmp)
    return {"venv": venv, "app": app, "env": env, "stage": final, "site": site}


def test_the_installed_wheel_is_the_one_imported(image):
    where = run([str(image["venv"] / "bin" / "python"), "-c",
                 "import tensorwire, tensorwire.v1; print(tensorwire.__file__)"],
                env=image["env"], cwd=image["app"]).stdout.strip()
    assert where.startswith(str(image["site"])), where


def test_entrypoint_serves_and_healthcheck_passes(image):
    stage = image["stage"]
    entrypoint = stage.exec_form("ENTRYPOINT")
    healthcheck = stage.exec_form("HEALTHCHECK")
    http_port, grpc_port = free_ports(2)
    # `docker run -e TENSORWIRE_HTTP_PORT=... -e TENSORWIRE_GRPC_PORT=...`
    env = {**image["env"], "TENSORWIRE_HTTP_PORT": str(http_port),
           "TENSORWIRE_GRPC_PORT": str(grpc_port)}
    # nothing listening yet: the healthcheck fails
    assert subprocess.run(healthcheck, cwd=image["app"], env=env, timeout=30).returncode == 1
    proc = subprocess.Popen(entrypoint, cwd=image["app"], env=env, stdout=subprocess.PIPE,
                            stderr=subprocess.STDOUT, text=True, start_new_session=True)
    try:
        url = f"http://127.0.0.1:{http_port}"
        wait_ready(url, proc=proc)
        check = subprocess.run(healthcheck, cwd=image["app"], env=env, timeout=30)
        assert check.returncode == 0
        reply = post(url, "summarize", {"text": "one typed contract", "max_words": 2})
        assert reply.json() == {"summary": "one typed", "words": 3}

        os.killpg(proc.pid, signal.SIGTERM)
        assert proc.wait(30) == 0
        after = subprocess.run(healthcheck, cwd=image["app"], env=env, timeout=30)
        assert after.returncode == 1
    finally:
        if proc.poll() is None:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(proc.pid, signal.SIGKILL)
            proc.wait(10)
    output = proc.stdout.read()
    # ENV TENSORWIRE_LOG_FORMAT=json and --host 0.0.0.0 from the ENTRYPOINT took effect
    assert '"logger":"tensorwire.serve"' in output and "0.0.0.0" in output, output
