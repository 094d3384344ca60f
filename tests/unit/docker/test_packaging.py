"""The distribution builds without setuptools deprecation warnings and ships its data:
the Swagger UI assets served at /docs, py.typed and the tensorwire.v1 descriptor set."""

from __future__ import annotations

import shutil
import subprocess
import sys
import tomllib
import zipfile

import pytest
from packaging.requirements import Requirement

from tests.support.servers import ROOT

pytestmark = pytest.mark.slow
PYPROJECT = tomllib.loads((ROOT / "pyproject.toml").read_text())


def test_license_is_an_spdx_string_the_build_backend_understands():
    assert PYPROJECT["project"]["license"] == "Apache-2.0"
    (setuptools,) = [Requirement(r) for r in PYPROJECT["build-system"]["requires"]
                     if Requirement(r).name == "setuptools"]
    # SPDX `license` strings are understood from setuptools 77 on
    assert "77" in setuptools.specifier and "76.9" not in setuptools.specifier


def test_wheel_builds_without_warnings_and_ships_its_data(tmp_path):
    src = tmp_path / "src"
    src.mkdir()
    # a clean copy of what the Docker build stage copies (no stale build/ folder)
    shutil.copy2(ROOT / "pyproject.toml", src)
    shutil.copy2(ROOT / PYPROJECT["project"]["readme"], src)
    folders = {d.split("/")[0] for d in PYPROJECT["tool"]["setuptools"]["package-dir"].values()}
    for folder in folders:
        shutil.copytree(ROOT / folder, src / folder,
                        ignore=shutil.ignore_patterns("__pycache__", "*.pyc"))
    built = subprocess.run(
        [sys.executable, "-m", "build", "--wheel", "--no-isolation", "--outdir",
         str(tmp_path / "dist"), str(src)], capture_output=True, text=True, timeout=300)
    assert built.returncode == 0, built.stdout + built.stderr
    output = built.stdout + built.stderr
    # setuptools' deprecations (license table, data in a would-be package) print as
    # "WARNING ..." banners; distutils' lowercase "warning: byte-compiling" notes do not
    assert not [line for line in output.splitlines() if line.startswith("WARNING")], output

    (wheel,) = (tmp_path / "dist").glob("tensorwire-*.whl")
    with zipfile.ZipFile(wheel) as zf:
        names = set(zf.namelist())
        metadata = zf.read(next(n for n in names if n.endswith(".dist-info/METADATA")))
    swagger = ROOT / "server" / "static" / "swagger"
    expected = {f"tensorwire/static/swagger/{p.name}" for p in swagger.iterdir()}
    assert expected and expected <= names, sorted(expected - names)
    assert {"tensorwire/py.typed", "tensorwire/v1/types.binpb",
            "tensorwire/v1/types.proto"} <= names
    assert b"\nLicense-Expression: Apache-2.0\n" in metadata
