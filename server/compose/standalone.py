"""Dependencies of an instance made by hand, outside any server.

`Pipeline()` in a unit test or a notebook is an ordinary object, and `self.model` in
it must still work, as `bentoml.depends` does outside `bentoml serve`. The first access
places the dependency as a server would with no placement settings: at its `url` when
the code gave one, else in this process, where its service (and its own dependencies)
is started on a private event loop thread shared by every such dependency of the
process. Calls then go through the same plans (or client) as in a server; only what
belongs to a request (deadline, trace, request id) has no request to come from.

Each `depends(...)` attribute is resolved once per process (as BentoML caches its
resolution on the `Dependency`), and everything is stopped at interpreter exit.
"""

from __future__ import annotations

import atexit
import threading
from typing import Any

from ..client.loop import LoopThread
from ..contract.dependency import Dependency
from .group import Group
from .handles import ServiceHandle
from .local import LocalBackend
from .remote import RemoteBackend

_lock = threading.Lock()
_loop: LoopThread | None = None
_handles: dict[int, ServiceHandle] = {}
_closers: list[Any] = []


def _loop_thread() -> LoopThread:
    global _loop
    if _loop is None or not _loop.running:
        _loop = LoopThread(name="tensorwire-dependencies")
        atexit.register(_shutdown)
    return _loop


def resolve(dep: Dependency, instance: Any) -> ServiceHandle:
    """The handle of `dep` for an instance no server placed (see the module doc)."""
    with _lock:
        handle = _handles.get(id(dep))
        if handle is not None:
            return handle
        loop = _loop_thread()
        if dep.url is not None:
            backend: Any = RemoteBackend(dep.name, dep.url, dep.spec)
        else:
            assert dep.spec is not None  # depends() needs a class or a URL
            group = Group(dep.spec, keep_contexts=True)
            loop.run(group.start())
            _closers.append(group)
            runtime = group.runtime(dep.spec.cls)
            plans = {name: runtime.plan(name) for name in dep.spec.apis}
            backend = LocalBackend(dep.name, plans,
                                   group.kept.append if group.kept is not None else None)
        _closers.append(backend)
        handle = _handles[id(dep)] = ServiceHandle(backend, loop.loop)
        return handle


def _shutdown() -> None:
    """Stop what was started for hand-made instances (at interpreter exit)."""
    global _loop
    loop, _loop = _loop, None
    if loop is None:
        return
    while _closers:
        closer = _closers.pop()
        try:
            loop.run(closer.close())
        except Exception:  # exiting anyway: never fail the interpreter's exit
            pass
    _handles.clear()
    loop.stop()
