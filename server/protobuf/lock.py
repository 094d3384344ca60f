"""The published `.proto` as a lock on field numbers and enum values.

Numbers otherwise follow declaration order, so an input inserted in the middle of a
method renumbers every field after it and a client built from yesterday's `.proto`
sends `x` into `note` without anything failing. Generated against a published file,
a contract keeps what was published:

- a field (or enum value) keeps the number that a same-named one has in the published
  message (or enum) of the same name: request and response messages, nested messages
  generated from models, union messages and enums alike;
- a new one gets a number above the highest ever used there (fields, and numbers the
  published file reserves), so it never takes a number an old client knows (where
  `reserved N to max` leaves none above, the lowest number never used);
- one that is gone becomes `reserved` (number and name), and reserved stays reserved:
  a later generation carries the published `reserved` statements on;
- a `FieldNumber` pin still wins, but a pin that contradicts the lock (another number
  for the same field, or a number published for another field or reserved) is an error
  naming both.

Generating against the published file with nothing changed gives the same file byte for
byte, so publishing again is a no-op. The lock is read without protoc (`parse`): a
server may load it at start-up (`--proto-lock`).
"""

from __future__ import annotations

import functools
from dataclasses import dataclass
from pathlib import Path

from .parse import MAX_ENUM, MAX_FIELD, ProtoFile, ProtoSyntaxError, Reserved, parse_proto

#: Field numbers protobuf keeps for itself.
_PROTOBUF_RESERVED = (19_000, 19_999)


class LockError(ValueError):
    """The lock cannot be read or applied; the message names the file and the field."""


@dataclass(frozen=True)
class NumberLock:
    """The published numbers of one message's fields, or one enum's values."""

    #: Message or enum name as the published file spells it (`Review`, `ClassifyRequest`).
    name: str
    #: (name, number) of each published field or value, in published order.
    numbers: tuple[tuple[str, int], ...]
    #: Reserved number ranges, inclusive at both ends.
    reserved_ranges: tuple[tuple[int, int], ...] = ()
    reserved_names: tuple[str, ...] = ()
    #: The largest number `reserved ... to max` may stand for.
    top: int = MAX_FIELD

    @functools.cached_property
    def by_name(self) -> dict[str, int]:
        return dict(self.numbers)

    @functools.cached_property
    def by_number(self) -> dict[int, str]:
        return {number: name for name, number in self.numbers}

    def is_reserved(self, number: int) -> bool:
        return any(lo <= number <= hi for lo, hi in self.reserved_ranges)

    @functools.cached_property
    def highest(self) -> int:
        """The highest number ever used: published or reserved (`to max` aside, which
        would leave no number above it)."""
        used = [n for _, n in self.numbers]
        used += [hi for _, hi in self.reserved_ranges if hi < self.top]
        return max(used, default=0)

    def reserved_after(self, present: set[str]) -> tuple[list[tuple[int, int]], list[str]]:
        """`reserved` ranges (inclusive) and names of a generation whose fields (or
        values) are `present`: what the published file reserved, plus what is gone.

        A name that is present again is no longer reserved (it came back with a new
        number); its old number stays reserved.
        """
        ranges = list(self.reserved_ranges)
        names = set(self.reserved_names)
        for name, number in self.numbers:
            if name not in present:
                ranges.append((number, number))
                names.add(name)
        return merge_ranges(ranges), sorted(names - present)


def merge_ranges(ranges: list[tuple[int, int]]) -> list[tuple[int, int]]:
    """Sorted, with overlapping and adjacent inclusive ranges joined (one spelling of
    a set of numbers, so that regenerating gives the same text)."""
    out: list[tuple[int, int]] = []
    for lo, hi in sorted(ranges):
        if out and lo <= out[-1][1] + 1:
            out[-1] = (out[-1][0], max(out[-1][1], hi))
        else:
            out.append((lo, hi))
    return out


def _number_lock(name: str, numbers: list[tuple[str, int]], reserved: Reserved,
                 top: int) -> NumberLock:
    return NumberLock(name, tuple(numbers), tuple(merge_ranges(reserved.ranges)),
                      tuple(sorted(set(reserved.names))), top)


@dataclass(frozen=True)
class ProtoLock:
    """The numbers of a published `.proto` file, by message and enum name."""

    #: Where the lock was read (shown in errors).
    source: str
    messages: tuple[NumberLock, ...] = ()
    enums: tuple[NumberLock, ...] = ()

    @functools.cached_property
    def _messages(self) -> dict[str, NumberLock]:
        return {m.name: m for m in self.messages}

    @functools.cached_property
    def _enums(self) -> dict[str, NumberLock]:
        return {e.name: e for e in self.enums}

    def message(self, name: str) -> NumberLock | None:
        return self._messages.get(name)

    def enum(self, name: str) -> NumberLock | None:
        return self._enums.get(name)

    @classmethod
    def from_file(cls, parsed: ProtoFile, source: str) -> ProtoLock:
        messages = tuple(
            _number_lock(m.name, [(f.name, f.number) for f in m.fields], m.reserved,
                         MAX_FIELD)
            for m in parsed.messages.values())
        enums = tuple(_number_lock(e.name, list(e.values.items()), e.reserved, MAX_ENUM)
                      for e in parsed.enums.values())
        return cls(source, messages, enums)


def published_file(tree: str | Path, file_name: str) -> Path:
    """The service's file in a published tree (`tree/<package path>/<service>.proto`);
    `tree` may also name the `.proto` file itself."""
    path = Path(tree)
    return path if path.suffix == ".proto" else path / file_name


def read_published(tree: str | Path, file_name: str) -> tuple[Path, ProtoFile]:
    """The parsed published file of a service (raises LockError naming the path)."""
    path = published_file(tree, file_name)
    try:
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        raise LockError(f"no published contract at {path} (publish one with "
                        f"`tensorwire proto MODULE:Class --out {tree}`)") from None
    except OSError as exc:
        raise LockError(f"cannot read the published contract {path}: "
                        f"{exc.strerror or exc}") from None
    try:
        return path, parse_proto(text)
    except ProtoSyntaxError as exc:
        raise LockError(f"{path}: {exc}") from None


def load_lock(tree: str | Path, file_name: str) -> ProtoLock:
    """The lock of a service whose generated file is `file_name`, read from `tree`."""
    path, parsed = read_published(tree, file_name)
    return ProtoLock.from_file(parsed, str(path))


class Numbering:
    """Hands out the numbers of one message's fields or one enum's values.

    Without a lock: fixed numbers (pins) first, then 1, 2, 3... in declaration order,
    skipping fixed ones. With one: published numbers are kept and new ones start above
    the highest number ever used. Numbers protobuf keeps for itself are never given.
    """

    def __init__(self, owner: str, lock: NumberLock | None, source: str = "",
                 first: int = 1, skip: tuple[int, int] | None = _PROTOBUF_RESERVED) -> None:
        self.owner = owner
        self.lock = lock
        self.source = source
        self.used: set[int] = set()
        self.fixed: set[int] = set()
        self.skip = skip
        self.next = lock.highest + 1 if lock is not None else first

    def locked(self, name: str) -> int | None:
        return self.lock.by_name.get(name) if self.lock is not None else None

    def check_pin(self, name: str, pin: int) -> None:
        """A pin must agree with the lock: raise LockError naming the pin and the lock."""
        lock = self.lock
        if lock is None:
            return
        where = f"the published contract {self.source}".rstrip()
        locked = lock.by_name.get(name)
        if locked is not None and locked != pin:
            raise LockError(f"{self.owner}.{name}: FieldNumber({pin}) contradicts {where}, "
                            f"where {name} = {locked}")
        other = lock.by_number.get(pin)
        if other is not None and other != name:
            raise LockError(f"{self.owner}.{name}: FieldNumber({pin}) is the number of "
                            f"{other!r} in {where} ({other} = {pin})")
        if lock.is_reserved(pin):
            raise LockError(f"{self.owner}.{name}: FieldNumber({pin}) is reserved in "
                            f"{where} (a removed field's number is never reused)")

    def set_aside(self, name: str, number: int) -> None:
        """Keep `number` (a pin or a locked number) from the automatic ones."""
        if number in self.fixed or number in self.used:
            raise TypeError(f"{self.owner}.{name}: field number {number} is already used")
        self.fixed.add(number)

    def take(self, name: str, number: int | None = None) -> int:
        """The number of field `name`: `number` if given, else its locked one, else the
        next free one."""
        if number is None:
            number = self.locked(name)
        if number is None:
            number = self._auto()
        elif number in self.used:
            raise TypeError(f"{self.owner}.{name}: field number {number} is already used")
        self.used.add(number)
        return number

    def _auto(self) -> int:
        n = self.next
        lock = self.lock
        ranges = [self.skip] if self.skip is not None else []
        if lock is not None:
            ranges += lock.reserved_ranges
        while True:
            hi = next((hi for lo, hi in ranges if lo <= n <= hi), None)
            if hi is not None:  # jump over a reserved range (`to max` too)
                n = hi + 1
            elif n in self.used or n in self.fixed or (lock is not None
                                                        and n in lock.by_number):
                n += 1
            else:
                break
        top = lock.top if lock is not None else MAX_FIELD
        if n > top:  # `reserved N to max`: the lowest number never used is as safe
            return self._lowest_unused()
        self.next = n + 1
        return n

    def _lowest_unused(self) -> int:
        lock = self.lock
        n = 1
        while (n in self.used or n in self.fixed
               or (self.skip is not None and self.skip[0] <= n <= self.skip[1])
               or (lock is not None and (n in lock.by_number or lock.is_reserved(n)))):
            n += 1
            if lock is not None and n > lock.highest:
                raise LockError(f"{self.owner}: no number is left that was never used")
        return n


__all__ = [
    "LockError",
    "NumberLock",
    "Numbering",
    "ProtoLock",
    "load_lock",
    "merge_ranges",
    "published_file",
    "read_published",
]
