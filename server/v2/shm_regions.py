"""Triton's system shared-memory extension: the regions clients register, and the
tensors a request reads from and writes to them.

A client on the same host creates a POSIX shared-memory object (tritonclient's
`tritonclient.utils.shared_memory`: `shm_open(key)`, which is `/dev/shm/<key>` on
Linux), registers a region of it by name (`register`: key, offset, byte size), then
names the region in an input's or requested output's parameters instead of sending
the tensor (`tensorwire.wire.oip.shm_parameters`). Both v2 transports delegate here.

- **Off unless the operator enables it** (`--shared-memory system`): the server maps
  memory a client names. Off, register and unregister answer 501 / UNIMPLEMENTED
  naming the flag (Triton's answer when `--allow-client-shm` is off); status answers
  that nothing is registered.
- **Keys stay in /dev/shm.** A key is a name directly in /dev/shm (leading slashes
  dropped, as `shm_open` does); one with a slash after them, `.` or `..` is refused,
  and the object is opened with O_NOFOLLOW and must be a regular file: a key never
  follows a link out of /dev/shm. A region must lie within the object.
- **Checked before any read or write.** A tensor's offset and byte size are checked
  against its region, an input's byte size against its shape x itemsize, an output's
  bytes against its byte size (all outputs before the first is written): 400 /
  INVALID_ARGUMENT naming the tensor and the parameter. An unknown region is 404 /
  NOT_FOUND, as Triton answers.
- **Inputs are read-only NumPy views of the region** (no copy here; where the API's
  codec copies, docs/guides/open-inference.md says). **Outputs are copied once** into
  the region, from the result's memory, and answered without data: the output's
  parameters name the region, its offset and the bytes written.
- **Per worker process.** Each worker of `--workers N` holds its own regions: a client
  registers on the connection it infers on (a gRPC channel, an HTTP keep-alive
  connection). A region is unmapped on unregister and when the server stops; one that
  a request in flight still views is unmapped when the last view goes (CPython's mmap
  refuses to close under a view, so no request ever reads unmapped memory).

CUDA shared memory needs a GPU and is not served (`tensorwire.v2.unsupported`).
"""

from __future__ import annotations

import errno
import logging
import mmap
import os
import stat
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Final, NamedTuple

from ..codecs.v2_facet import Tensor
from ..errors import InvalidArgument, NotFound, Unimplemented
from ..wire.oip import OIPError, check_shape, datatype, raw_from_array
from ..wire.oip.raw import array_from_raw
from ..wire.oip.shm_parameters import (
    SHARED_MEMORY_BYTE_SIZE,
    SHARED_MEMORY_OFFSET,
    SHARED_MEMORY_REGION,
    SharedRef,
    check_input_size,
    shared_ref,
)

if TYPE_CHECKING:
    import numpy as np

log = logging.getLogger("tensorwire.v2")

#: The parameters that name a region (any of them makes a tensor a shared one).
_SHM_KEYS: Final = frozenset({SHARED_MEMORY_REGION, SHARED_MEMORY_OFFSET,
                              SHARED_MEMORY_BYTE_SIZE})

#: Triton's name for the extension, listed in server metadata while it is on.
EXTENSION: Final = "system_shared_memory"
#: The setting that turns it on, as the operator types it.
FLAG: Final = "--shared-memory system"
#: Where POSIX shared-memory objects live (Linux's shm_open).
SHM_DIR: Final = "/dev/shm"
#: The most regions one worker maps at a time (each holds a file descriptor).
MAX_REGIONS: Final = 1024
_OPEN_FLAGS: Final = os.O_RDWR | os.O_NOFOLLOW | os.O_CLOEXEC | os.O_NONBLOCK


class AlreadyExists(InvalidArgument):
    """A region name already registered: Triton's ALREADY_EXISTS (400 over HTTP, as
    Triton maps it; ALREADY_EXISTS over gRPC)."""

    grpc_code = "ALREADY_EXISTS"


def disabled() -> Unimplemented:
    """The refusal while the extension is off (Triton's words, then the flag)."""
    return Unimplemented(f"Client shared memory is disabled: start the server with {FLAG} "
                         f"to serve Triton's '{EXTENSION}' extension (it maps memory a "
                         "client names)")


def in_decoupled(model: str) -> Unimplemented:
    """A decoupled model's tensors travel in Triton's stream, one response per chunk or
    element: refused in shared memory, where each would overwrite the last."""
    return Unimplemented(f"model {model!r} is decoupled: its tensors travel in the "
                         "stream, not in shared memory")


@dataclass(eq=False)
class Region:
    """One registered region: `byte_size` bytes at `offset` of the object `key`."""

    name: str
    key: str
    offset: int
    byte_size: int
    mapping: mmap.mmap
    #: The region's bytes within the mapping (which starts at a page boundary).
    view: memoryview

    def status(self) -> dict[str, Any]:
        """Triton's status entry (HTTP JSON; gRPC's RegionStatus has the same fields)."""
        return {"name": self.name, "key": self.key, "offset": self.offset,
                "byte_size": self.byte_size}

    def close(self) -> bool:
        """Unmap; False while an array still views the region (tried again later)."""
        try:
            self.view.release()
            self.mapping.close()
        except BufferError:
            return False
        return True


class Written(NamedTuple):
    """An output written to a region: its datatype and shape, and the response
    parameters that say where (region, offset, bytes written)."""

    datatype: str
    shape: list[int]
    parameters: dict[str, Any]


class OutputTarget(NamedTuple):
    """Where one requested output goes: `view` (writable, `ref.byte_size` bytes)."""

    ref: SharedRef
    view: memoryview


@dataclass
class Placement:
    """What one request reads from regions (its inputs) and writes to them."""

    #: Input name -> a read-only view of its bytes in the region, as its array.
    inputs: dict[str, np.ndarray] = field(default_factory=dict)
    #: Requested output name -> where it goes.
    outputs: dict[str, OutputTarget] = field(default_factory=dict)

    def write(self, outputs: Sequence[Tensor]) -> dict[str, Written]:
        """Write the outputs that go to regions, once every one is known to fit (a
        refusal writes nothing); returns what the answer says of each."""
        pending = []
        for t in outputs:
            target = self.outputs.get(t.name)
            if target is None:
                continue
            dt, shape, data = raw_from_array(t.array)  # a view when contiguous
            nbytes = memoryview(data).nbytes
            if nbytes > target.ref.byte_size:
                raise OIPError.output(
                    t.name, f"'{SHARED_MEMORY_BYTE_SIZE}' {target.ref.byte_size} is too "
                            f"small: the output has {nbytes} bytes")
            pending.append((t.name, target, dt, shape, data, nbytes))
        written: dict[str, Written] = {}
        for name, target, dt, shape, data, nbytes in pending:
            if nbytes:
                # the one copy, byte for byte (a memmove: safe where the output is a
                # view of an input region); what the bytes mean is the wire's affair
                target.view[:nbytes] = data
            written[name] = Written(dt, shape, {
                SHARED_MEMORY_REGION: target.ref.region,
                SHARED_MEMORY_OFFSET: target.ref.offset, SHARED_MEMORY_BYTE_SIZE: nbytes})
        return written


#: A request's inputs as (name, datatype, shape, parameters, whether it carries data:
#: JSON `data` or gRPC `contents`), outputs as (name, parameters): what both transports
#: have before decoding.
InputSpec = tuple[str, Any, Any, Mapping[str, Any], bool]
OutputSpec = tuple[str, Mapping[str, Any]]


class SystemSharedMemory:
    """The system shared-memory regions of one worker process (see the module)."""

    def __init__(self, enabled: bool, workers: int = 1, directory: str = SHM_DIR) -> None:
        self.enabled = enabled
        self.workers = workers
        self.directory = directory
        self._regions: dict[str, Region] = {}
        #: Unregistered regions an array still viewed; unmapped once none does.
        self._closing: list[Region] = []

    # ------------------------------------------------------------------ the extension
    def register(self, name: str, key: str, offset: int, byte_size: int) -> None:
        """Map `byte_size` bytes at `offset` of the object `key` as region `name`."""
        if not self.enabled:
            raise disabled()
        self._sweep()
        if not name:
            raise InvalidArgument("'region name' is necessary to register system shared "
                                  "memory region")
        if name in self._regions:
            raise AlreadyExists(f"shared memory region '{name}' already in manager")
        if len(self._regions) >= MAX_REGIONS:
            raise InvalidArgument(f"failed to register shared memory region '{name}': this "
                                  f"worker maps {MAX_REGIONS} regions, the most it holds; "
                                  "unregister some first")
        for what, value in (("offset", offset), ("byte_size", byte_size)):
            if isinstance(value, bool) or not isinstance(value, int) or value < 0:
                raise InvalidArgument(f"failed to register shared memory region '{name}': "
                                      f"{what} must be a non-negative integer")
        if byte_size == 0:
            raise InvalidArgument(f"failed to register shared memory region '{name}': "
                                  "invalid args: byte_size must be positive")
        fd = self._open(name, key)
        try:
            info = os.fstat(fd)
            if not stat.S_ISREG(info.st_mode):
                raise InvalidArgument(f"cannot register shared memory region '{name}' - "
                                      f"'{key}' is not a shared memory object")
            if offset + byte_size > info.st_size:
                raise InvalidArgument(
                    f"failed to register shared memory region '{name}': invalid args: "
                    f"offset {offset} + byte_size {byte_size} runs past the end of "
                    f"'{key}' ({info.st_size} bytes)")
            start = offset - offset % mmap.ALLOCATIONGRANULARITY
            try:
                mapping = mmap.mmap(fd, offset + byte_size - start, mmap.MAP_SHARED,
                                    mmap.PROT_READ | mmap.PROT_WRITE, offset=start)
            except OSError as exc:
                raise InvalidArgument(f"failed to register shared memory region '{name}': "
                                      f"unable to map '{key}': {exc.strerror}") from None
        finally:
            os.close(fd)  # the mapping keeps what it needs
        view = memoryview(mapping)[offset - start:]
        self._regions[name] = Region(name, key, offset, byte_size, mapping, view)
        log.debug("registered system shared memory region %r: %d bytes at %d of %r",
                  name, byte_size, offset, key)

    def _open(self, name: str, key: str) -> int:
        """The object `key` names in the shm directory, opened read-write; refused if
        the key would leave the directory or follow a link."""
        if not isinstance(key, str):
            raise InvalidArgument(f"cannot register shared memory region '{name}' - the "
                                  "key must be a string")
        base = key.lstrip("/")
        if not base:
            raise InvalidArgument(f"cannot register shared memory region '{name}' - "
                                  f"invalid shm key '{key}'")
        if "/" in base or base in (".", "..") or "\0" in base:
            raise InvalidArgument(f"cannot register shared memory region '{name}' - "
                                  f"invalid shm key '{key}': a key names an object in "
                                  f"{self.directory} (no '/' after its leading ones)")
        try:
            return os.open(os.path.join(self.directory, base), _OPEN_FLAGS)
        except OSError as exc:
            why = ("it is a symbolic link" if exc.errno == errno.ELOOP
                   else exc.strerror or str(exc))
            raise InvalidArgument(f"Unable to open shared memory region: '{key}' ({why})"
                                  ) from None

    def unregister(self, name: str = "") -> None:
        """Unregister region `name`, or every region when `name` is empty; a name that
        is not registered is no error (Triton's answer)."""
        if not self.enabled:
            raise disabled()
        names = [name] if name else list(self._regions)
        for n in names:
            region = self._regions.pop(n, None)
            if region is not None and not region.close():
                self._closing.append(region)  # a request in flight still views it
        self._sweep()

    def status(self, name: str = "") -> list[dict[str, Any]]:
        """Triton's status: every region, or region `name` (NotFound if unknown)."""
        self._sweep()
        if not name:  # by name, as Triton's (a std::map)
            return [self._regions[n].status() for n in sorted(self._regions)]
        region = self._regions.get(name)
        if region is None:
            raise NotFound(f"Unable to find system shared memory region: '{name}'"
                           + self._per_worker())
        return [region.status()]

    def cuda_status(self, name: str = "") -> list[dict[str, Any]]:
        """Triton's CUDA shared-memory status, as a Triton without a GPU answers: no
        regions (registering one is refused: `tensorwire.v2.unsupported`)."""
        if name in self._regions:
            raise NotFound(f"The region named '{name}' is registered as system shared "
                           "memory, not CUDA shared memory")
        if name:
            raise NotFound(f"Unable to find cuda shared memory region: '{name}'")
        return []

    def cuda_unregister(self, name: str = "") -> None:
        """Triton's CUDA unregister: no CUDA region is ever registered, so nothing to do
        (refused while the extension is off, as Triton's)."""
        if not self.enabled:
            raise disabled()

    def close(self) -> None:
        """Unmap every region (the server stops); views still held keep theirs until
        they go, then the process's end unmaps it."""
        for region in self._regions.values():
            if not region.close():
                self._closing.append(region)
        self._regions.clear()
        self._sweep()
        if self._closing:
            log.debug("%d shared memory region(s) still viewed at shutdown",
                      len(self._closing))
            self._closing.clear()

    def _sweep(self) -> None:
        if self._closing:
            self._closing = [r for r in self._closing if not r.close()]

    def _per_worker(self) -> str:
        if self.workers <= 1:
            return ""
        return (f" (this server runs {self.workers} worker processes, each with its own "
                "regions: register on the connection you infer on)")

    # ------------------------------------------------------------------ requests
    def place(self, inputs: Iterable[InputSpec], outputs: Iterable[OutputSpec]
              ) -> Placement | None:
        """The regions a request's tensors name, checked; None when it names none."""
        placement: Placement | None = None
        for name, dt_name, shape, params, has_data in inputs:
            if _SHM_KEYS.isdisjoint(params):  # the common case, without a call
                continue
            ref = shared_ref(params, name)
            if ref is None:
                continue
            if has_data or "binary_data_size" in params:
                raise OIPError.tensor(name, "must set only one of 'data' (gRPC: 'contents'), "
                                            f"'binary_data_size' and '{SHARED_MEMORY_REGION}'")
            dt = datatype(dt_name, name)
            dims = check_shape(shape, name, dt)
            check_input_size(ref, dt, dims, name)
            view = self._bytes(ref, name, True).toreadonly()
            placement = placement or Placement()
            placement.inputs[name] = array_from_raw(view, dt, dims, name)
        for name, params in outputs:
            if _SHM_KEYS.isdisjoint(params):
                continue
            ref = shared_ref(params, name, input=False)
            if ref is None:
                continue
            if params.get("binary_data") is True:
                raise OIPError.output(name, f"can't set both '{SHARED_MEMORY_REGION}' and "
                                            "'binary_data'")
            placement = placement or Placement()
            placement.outputs[name] = OutputTarget(ref, self._bytes(ref, name, False))
        return placement

    def _bytes(self, ref: SharedRef, name: str, input: bool) -> memoryview:
        """The `ref.byte_size` bytes at `ref.offset` of the region, checked against it."""
        error = OIPError.tensor if input else OIPError.output
        if not self.enabled:
            raise Unimplemented(f"{'input' if input else 'output'} {name!r}: "
                                f"{disabled().message}")
        if self._closing:
            self._sweep()
        region = self._regions.get(ref.region)
        if region is None:
            raise NotFound(f"{'input' if input else 'output'} {name!r}: Unable to find "
                           f"shared memory region: '{ref.region}'" + self._per_worker())
        if ref.offset >= region.byte_size:
            raise error(name, f"Invalid offset for shared memory region: '{ref.region}': "
                              f"'{SHARED_MEMORY_OFFSET}' {ref.offset} is not within its "
                              f"{region.byte_size} bytes")
        if ref.offset + ref.byte_size > region.byte_size:
            raise error(name, f"Invalid offset + byte size for shared memory region: "
                              f"'{ref.region}': '{SHARED_MEMORY_OFFSET}' {ref.offset} + "
                              f"'{SHARED_MEMORY_BYTE_SIZE}' {ref.byte_size} run past its "
                              f"{region.byte_size} bytes")
        return region.view[ref.offset:ref.offset + ref.byte_size]
