"""A service that says who answered: which worker process, over which connection.

Tests of how calls spread over workers and connections count the answers: `pid` names
the worker, `peer` (the client's address and port as the server saw it) names the
connection, so a client that reconnected shows a new peer. Importable by the CLI as
`tests.support.spread_service:Spread`.
"""

from __future__ import annotations

import asyncio
import os

from pydantic import BaseModel

import tensorwire


class Who(BaseModel):
    pid: int
    peer: str


@tensorwire.service
class Spread:
    """Who answered a call."""

    @tensorwire.api
    async def whoami(self, ctx: tensorwire.Context) -> Who:
        """The worker and the connection that carried this call."""
        return Who(pid=os.getpid(), peer=ctx.request.peer or "")

    @tensorwire.api
    async def hold(self, ctx: tensorwire.Context, seconds: float = 1.0) -> Who:
        """Answer after `seconds`: a call still in flight when its connection ages."""
        await asyncio.sleep(seconds)
        return Who(pid=os.getpid(), peer=ctx.request.peer or "")
