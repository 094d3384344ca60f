"""A service whose one API holds its request until the test opens a gate (creates a
file), so a test can act while a request is certainly in flight, with no timing guess.
Importable by the CLI as `tests.support.gate_service:Gate`; the gate's path comes in
the environment variable GATE_ENV."""

from __future__ import annotations

import asyncio
import os
from pathlib import Path

import tensorwire

GATE_ENV = "TENSORWIRE_TEST_GATE"


@tensorwire.service
class Gate:
    """Holds requests until released."""

    @tensorwire.api
    async def hold(self) -> str:
        """Answer "released" once the gate file exists."""
        gate = Path(os.environ[GATE_ENV])
        while not gate.exists():
            await asyncio.sleep(0.02)
        return "released"
