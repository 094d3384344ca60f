"""What a new contract breaks for JSON/HTTP clients, told from two `/schema.json` documents.

`buf breaking` judges the `.proto`; it cannot see what only the JSON side has: which
inputs are required, the constraints a value must meet (`Le`, `MaxLen`, `Shape`,
`DType`, `ContentType`, ...), the routes. Those facts are in the service's
`/schema.json` (the document BentoML's client reads, derived from the same descriptor
and pydantic models that validate requests), so the previous contract's facts are read
from the `schema.json` published next to its `.proto`, and compared with the current
one. Breaking, for a client written against the old document:

- a removed route (or one moved to another path): 404;
- an input that became a stream, or stopped being one (a POST against a WebSocket);
- a new required input, or an input that lost its default: 400 when not sent;
- a removed input (400: unknown field) or a removed output field;
- a changed type (an input must accept every type it did, an output may only return
  types it did; `integer` to `number` widens an input);
- a narrowed constraint on an input: a lower upper bound or higher lower bound, a
  shorter maximum length or count, a new or changed `pattern`, fewer enum values, a
  value that no longer accepts `null`, a tensor's `Shape` or `DType`, a file's
  `ContentType`, a DataFrame's required columns.

Widening (a higher maximum, an added optional input or output field) is safe and
reported by nothing.
"""

from __future__ import annotations

import fnmatch
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from typing import Any

#: Rule names of the JSON-side findings (buf's own rule names mark gRPC-side ones).
ROUTE_REMOVED = "ROUTE_REMOVED"
NEW_REQUIRED_INPUT = "NEW_REQUIRED_INPUT"
INPUT_REMOVED = "INPUT_REMOVED"
OUTPUT_FIELD_REMOVED = "OUTPUT_FIELD_REMOVED"
TYPE_CHANGED = "TYPE_CHANGED"
CONSTRAINT_NARROWED = "CONSTRAINT_NARROWED"

_UPPER = ("maximum", "exclusiveMaximum")
_LOWER = ("minimum", "exclusiveMinimum")
_AT_MOST = ("maxLength", "maxItems", "maxProperties")
_AT_LEAST = ("minLength", "minItems", "minProperties")


@dataclass(frozen=True)
class Finding:
    """One breaking change, named by API and parameter where it has one."""

    #: The API (method) name; None for what belongs to no API.
    api: str | None
    #: What inside the API: `input "x"`, `output field "score"`, `rpc Classify`.
    where: str
    message: str
    #: A JSON-side rule above, or the buf rule that found it (`FIELD_SAME_TYPE`).
    rule: str
    #: Which clients it breaks: "json" (HTTP) or "grpc".
    side: str = "json"

    def __str__(self) -> str:
        return ": ".join(p for p in (self.api, self.where, self.message) if p) + \
            f" [{self.rule}]"


def json_breaking(old: Mapping[str, Any], new: Mapping[str, Any]) -> list[Finding]:
    """Breaking changes from schema.json document `old` to `new`, route by route."""
    new_routes = {r["name"]: r for r in new.get("routes", [])}
    out: list[Finding] = []
    for route in old.get("routes", []):
        name = route["name"]
        now = new_routes.get(name)
        if now is None:
            out.append(Finding(name, f"POST {route['route']}", "route removed: clients "
                               "calling it get 404 (gRPC: UNIMPLEMENTED)", ROUTE_REMOVED))
        elif now["route"] != route["route"]:
            out.append(Finding(name, f"POST {route['route']}", f"route moved to "
                               f"{now['route']}: clients calling the old path get 404",
                               ROUTE_REMOVED))
        else:
            out.extend(_route(name, route, now))
    return out


def _route(api: str, old: Mapping[str, Any], new: Mapping[str, Any]) -> Iterator[Finding]:
    oi, ni = old.get("input", {}), new.get("input", {})
    if bool(oi.get("is_stream")) != bool(ni.get("is_stream")):
        was, now = ("a stream (WebSocket)", "one value (POST)") if oi.get("is_stream") \
            else ("one value (POST)", "a stream (WebSocket)")
        yield Finding(api, "input", f"changed from {was} to {now}", TYPE_CHANGED)
    elif bool(oi.get("root_input")) != bool(ni.get("root_input")):
        was = "a root input (the body is the value)" if oi.get("root_input") else \
            "keyword inputs (a JSON object)"
        yield Finding(api, "input", f"changed from {was} to another form", TYPE_CHANGED)
    elif oi.get("root_input"):
        yield from _Compare(api, "input").value([str(oi.get("root_field", "body"))], oi, ni)
    else:
        yield from _Compare(api, "input").object([], oi, ni)
    oo, no = old.get("output", {}), new.get("output", {})
    if bool(oo.get("is_stream")) != bool(no.get("is_stream")):
        was, now = ("a stream", "one value") if oo.get("is_stream") else (
            "one value", "a stream")
        yield Finding(api, "output", f"changed from {was} to {now}", TYPE_CHANGED)
    elif oo.get("media_type") != no.get("media_type"):
        yield Finding(api, "output", f"media type changed from {oo.get('media_type')} to "
                      f"{no.get('media_type')}", TYPE_CHANGED)
    else:
        yield from _Compare(api, "output").value([], oo, no)


def _strip_null(node: Mapping[str, Any]) -> tuple[Mapping[str, Any], bool]:
    """(the schema without its `null` alternative, whether it accepted null); a `const`
    reads as an `enum` of one value."""
    out, nullable = node, False
    for key in ("anyOf", "oneOf"):
        branches = node.get(key)
        if isinstance(branches, list) and any(b.get("type") == "null" for b in branches):
            rest = [b for b in branches if b.get("type") != "null"]
            base = {k: v for k, v in node.items() if k != key}
            out, nullable = ({**base, **rest[0]} if len(rest) == 1 else {**base, key: rest}), True
            break
    types = out.get("type")
    if isinstance(types, list) and "null" in types:
        rest_types = [t for t in types if t != "null"]
        out = {**out, "type": rest_types[0] if len(rest_types) == 1 else rest_types}
        nullable = True
    if "const" in out and "enum" not in out:
        out = {**out, "enum": [out["const"]]}
    return out, nullable


def _types(node: Mapping[str, Any]) -> set[str]:
    """The JSON types a schema allows (empty: anything, or not said)."""
    t = node.get("type")
    if isinstance(t, str):
        return {t}
    if isinstance(t, list):
        return set(t)
    out: set[str] = set()
    for key in ("anyOf", "oneOf"):
        for branch in node.get(key, []) or []:
            got = _types(branch)
            if not got:
                return set()
            out |= got
    return out


def _accepts(wide: set[str], narrow: set[str]) -> bool:
    """Whether every type of `narrow` is one of `wide` (an integer is a number)."""
    return all(t in wide or (t == "integer" and "number" in wide) for t in narrow)


def _bound(node: Mapping[str, Any], keys: tuple[str, str]) -> tuple[float, bool] | None:
    """(limit, exclusive) of `maximum`/`exclusiveMaximum` (or the minimum pair)."""
    inclusive, exclusive = node.get(keys[0]), node.get(keys[1])
    if exclusive is None:
        return None if inclusive is None else (float(inclusive), False)
    if inclusive is None:
        return float(exclusive), True
    upper = keys[0] == "maximum"  # both given: the tighter one holds
    if (exclusive <= inclusive) if upper else (exclusive >= inclusive):
        return float(exclusive), True
    return float(inclusive), False


def _show_bound(bound: tuple[float, bool] | None, upper: bool) -> str:
    if bound is None:
        return "none"
    value, exclusive = bound
    op = ("<" if exclusive else "<=") if upper else (">" if exclusive else ">=")
    return f"{op} {int(value) if value.is_integer() else value}"


class _Compare:
    """Walks an old and a new schema of one API's input or output side by side."""

    def __init__(self, api: str, side: str) -> None:
        self.api = api
        self.side = side  # "input" or "output"

    def where(self, path: list[str]) -> str:
        if self.side == "output":
            return f'output field "{".".join(path)}"' if path else "output"
        return f'input "{".".join(path)}"' if path else "input"

    def finding(self, path: list[str], message: str, rule: str) -> Finding:
        return Finding(self.api, self.where(path), message, rule)

    # -------------------------------------------------------------- objects
    def object(self, path: list[str], old: Mapping[str, Any], new: Mapping[str, Any]
               ) -> Iterator[Finding]:
        """The properties of an object schema (an API's inputs, or a model)."""
        props_old = old.get("properties") or {}
        props_new = new.get("properties") or {}
        if self.side == "input":
            req_old, req_new = set(old.get("required", [])), set(new.get("required", []))
            for name in props_new:
                if name in req_new and name not in props_old:
                    yield self.finding([*path, name], "new required input: a client that "
                                       "does not send it gets 400 / INVALID_ARGUMENT",
                                       NEW_REQUIRED_INPUT)
                elif name in req_new and name not in req_old:
                    yield self.finding([*path, name], "now required (it had a default): a "
                                       "client that does not send it gets 400 / "
                                       "INVALID_ARGUMENT", NEW_REQUIRED_INPUT)
            for name in props_old:
                if name not in props_new:
                    yield self.finding([*path, name], "removed: a JSON client that sends "
                                       "it gets 400 (unknown field); over gRPC it is "
                                       "dropped", INPUT_REMOVED)
        else:
            for name in props_old:
                if name not in props_new:
                    yield self.finding([*path, name], "removed: clients reading it find "
                                       "nothing", OUTPUT_FIELD_REMOVED)
        for name, schema in props_old.items():
            if name in props_new:
                yield from self.value([*path, name], schema, props_new[name])

    # --------------------------------------------------------------- values
    def value(self, path: list[str], old: Mapping[str, Any], new: Mapping[str, Any]
              ) -> Iterator[Finding]:
        o, o_null = _strip_null(old)
        n, n_null = _strip_null(new)
        to, tn = _types(o), _types(n)
        if to and tn and not (_accepts(tn, to) if self.side == "input" else
                              _accepts(to, tn)):
            yield self.finding(path, f"type changed from {_show_types(to)} to "
                               f"{_show_types(tn)}", TYPE_CHANGED)
            return
        if self.side == "input":
            if o_null and not n_null:
                yield self.finding(path, "no longer accepts null", CONSTRAINT_NARROWED)
            yield from self.constraints(path, o, n)
        elif n_null and not o_null:
            yield self.finding(path, "may now be null", TYPE_CHANGED)
        if _is_leaf(o) or _is_leaf(n):
            return  # a tensor, frame or file: its own facts were compared
        if "properties" in o or "properties" in n:
            yield from self.object(path, o, n)
        if isinstance(o.get("items"), Mapping) and isinstance(n.get("items"), Mapping):
            yield from self.value(_inner(path, "[]"), o["items"], n["items"])
        oa, na = o.get("additionalProperties"), n.get("additionalProperties")
        if isinstance(oa, Mapping) and isinstance(na, Mapping):
            yield from self.value(_inner(path, "{}"), oa, na)

    def constraints(self, path: list[str], o: Mapping[str, Any], n: Mapping[str, Any]
                    ) -> Iterator[Finding]:
        """Input constraints that accept less than they did."""

        def narrowed(what: str) -> Finding:
            return self.finding(path, f"{what}: values the old contract accepted are now "
                                "rejected (400 / INVALID_ARGUMENT)", CONSTRAINT_NARROWED)

        if _is_leaf(o) or _is_leaf(n):  # its JSON form's lengths follow its own facts
            yield from self.tensor_facts(path, o, n, narrowed)
            return

        for keys, upper in ((_UPPER, True), (_LOWER, False)):
            bo, bn = _bound(o, keys), _bound(n, keys)
            if bn is not None and (bo is None or _tighter(bn, bo, upper)):
                yield narrowed(f"{'upper' if upper else 'lower'} bound narrowed from "
                               f"{_show_bound(bo, upper)} to {_show_bound(bn, upper)}")
        for key in _AT_MOST:
            if key in n and (key not in o or n[key] < o[key]):
                yield narrowed(f"{key} lowered from {o.get(key, 'none')} to {n[key]}")
        for key in _AT_LEAST:
            if n.get(key, 0) > o.get(key, 0):
                yield narrowed(f"{key} raised from {o.get(key, 0)} to {n[key]}")
        mo, mn = o.get("multipleOf"), n.get("multipleOf")
        if mn is not None and (mo is None or (mo / mn) != int(mo / mn)):
            yield narrowed(f"multipleOf changed from {mo} to {mn}")
        if n.get("pattern") is not None and n.get("pattern") != o.get("pattern"):
            yield narrowed(f"pattern changed from {o.get('pattern')!r} to {n['pattern']!r}")
        if "enum" in n:
            gone = [v for v in o.get("enum", []) if v not in n["enum"]]
            if "enum" not in o or gone:
                yield narrowed(f"no longer accepts {', '.join(map(repr, gone)) or 'any value'}"
                               f" (allowed now: {', '.join(map(repr, n['enum']))})")

    def tensor_facts(self, path: list[str], o: Mapping[str, Any], n: Mapping[str, Any],
                     narrowed: Any) -> Iterator[Finding]:
        """Shape, DType, ContentType and DataFrame columns (schema.json's own keys)."""
        so, sn = o.get("shape"), n.get("shape")
        if sn is not None and not _shape_covers(sn, so):
            yield narrowed(f"Shape changed from {_show_shape(so)} to {_show_shape(sn)}")
        if n.get("dtype") is not None and n.get("dtype") != o.get("dtype"):
            yield narrowed(f"DType changed from {o.get('dtype', 'any')} to {n['dtype']}")
        old_casts = o.get("dtypes") or {}
        changed = {c: t for c, t in (n.get("dtypes") or {}).items() if old_casts.get(c) != t}
        if changed:
            yield narrowed(f"DataFrame column dtypes changed to {changed}")
        co, cn = o.get("content_type"), n.get("content_type")
        if cn is not None and not _content_covers(cn, co):
            yield narrowed(f"ContentType changed from {co or 'any'} to {cn}")
        if o.get("orient") is not None and n.get("orient") != o.get("orient"):
            yield self.finding(path, f"DataFrame orient changed from {o['orient']} to "
                               f"{n.get('orient')}", TYPE_CHANGED)
        if n.get("columns") is not None:
            added = [c for c in n["columns"] if c not in (o.get("columns") or [])]
            if o.get("columns") is None or added:
                yield narrowed(f"DataFrame now requires columns {added or n['columns']}")


def _tighter(new: tuple[float, bool], old: tuple[float, bool], upper: bool) -> bool:
    (vn, xn), (vo, xo) = new, old
    if vn != vo:
        return vn < vo if upper else vn > vo
    return xn and not xo


def _is_leaf(node: Mapping[str, Any]) -> bool:
    """A tensor, DataFrame or file: compared by its own facts, not by its JSON form."""
    return any(k in node for k in ("shape", "dtype", "orient", "content_type")) or \
        node.get("type") == "file"


def _inner(path: list[str], suffix: str) -> list[str]:
    return [*path[:-1], path[-1] + suffix] if path else [suffix]


def _show_types(types: set[str]) -> str:
    return "|".join(sorted(types))


def _shape_covers(new: list[int], old: list[int] | None) -> bool:
    """Whether every shape `old` accepted, `new` accepts (-1 matches any size)."""
    if old is None or len(new) != len(old):
        return False
    return all(n == -1 or n == o for n, o in zip(new, old, strict=True))


def _show_shape(dims: list[int] | None) -> str:
    if dims is None:
        return "any"
    return "(" + ", ".join("*" if d == -1 else str(d) for d in dims) + ")"


def _content_covers(new: str, old: str | None) -> bool:
    """Whether pattern(s) `new` accept every media type pattern(s) `old` did."""
    if old is None:
        return False
    wanted = [p.strip().lower() for p in old.split(",")]
    allowed = [p.strip().lower() for p in new.split(",")]
    return all(any(fnmatch.fnmatchcase(w, a) for a in allowed) for w in wanted)
