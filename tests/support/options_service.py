"""A service declared with BentoML's @service options, as code moving over has it.
Importable by the CLI as `tests.support.options_service:Configured`."""

from __future__ import annotations

import asyncio
import os

import tensorwire


@tensorwire.service(
    traffic={"timeout": 0.5, "max_concurrency": 8, "concurrency": 4},
    resources={"cpu": "2", "memory": "1Gi"},
    metrics={"enabled": False},
)
class Configured:
    @tensorwire.api
    async def sleep(self, seconds: float = 0.0) -> float:
        await asyncio.sleep(seconds)
        return seconds

    @tensorwire.api
    def pid(self) -> int:
        return os.getpid()
