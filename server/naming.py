"""Names derived from Python identifiers: protobuf messages, rpcs, packages, enum values.

One place for every spelling rule, since the generated contract must name the same
thing the same way wherever it is derived (descriptors, codecs, clients, tools).
"""

from __future__ import annotations

import re


def camel(name: str) -> str:
    """snake_case or kebab-case -> CamelCase (protobuf message and rpc names)."""
    parts = re.split(r"[^0-9A-Za-z]+", name)
    return "".join(p[:1].upper() + p[1:] for p in parts if p)


def snake(name: str) -> str:
    """CamelCase or any spelling -> snake_case (protobuf packages and file names)."""
    s = re.sub(r"(?<=[a-z0-9])(?=[A-Z])", "_", name)
    return re.sub(r"[^0-9a-zA-Z]+", "_", s).strip("_").lower()


def upper_snake(name: str) -> str:
    """CamelCase -> UPPER_SNAKE (the prefix of a proto enum's value names)."""
    return re.sub(r"(?<=[a-z0-9])(?=[A-Z])", "_", name).upper()


def enum_value_names(prefix: str, labels: list[str]) -> list[str]:
    """Proto enum value names: C++ scoping makes them package-global, so prefix them."""
    out: list[str] = []
    for label in labels:
        name = f"{prefix}_{re.sub(r'[^0-9A-Za-z]+', '_', label).strip('_').upper() or 'VALUE'}"
        while name in out:
            name += "_"
        out.append(name)
    return out
