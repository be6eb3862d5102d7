"""ProtoJSON input names: a field under its proto name (``history_length``) is accepted as
under its JSON name (``historyLength``), as ProtoJSON parsers must.

msgspec knows one name per field (``rename="camel"``) and ignores unknown ones, so a proto
name was silently dropped: ``GetTask {"history_length": 1}`` returned the whole history.
``normalize`` renames such keys before decoding, by a plan built once per type; a dict that
needs no change is returned as it is, not copied. Free-form values (``google.protobuf.Struct``
and ``Value``: ``metadata``, a Part's ``data``) are user data: their keys are never touched.

It also checks what ``strict=False`` decoding would let through: a Timestamp is an RFC 3339
string, where msgspec would read a number, or a string of one, as seconds since the epoch.
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime
from typing import Any

import msgspec
import msgspec.inspect as mi

from a2a_endpoint.errors import InvalidParamsError

__all__ = ["normalize"]

#: Walks a decoded JSON value at a ProtoJSON path: the value with JSON names, the same object
#: when nothing in it changed.
Walk = Callable[[Any, str], Any]


@dataclass(frozen=True, slots=True)
class _Plan:
    renames: dict[str, str]  # proto name → JSON name, where they differ
    children: tuple[tuple[str, Walk], ...]  # JSON name → walk, for the fields that need one


def normalize(params: dict[str, Any], params_type: type[msgspec.Struct]) -> dict[str, Any]:
    """``params`` (decoded JSON) with every field of ``params_type``'s structs under its JSON
    name, recursively. InvalidParamsError for a field given under both names (protobuf's Go
    and Java parsers refuse a duplicate field; keeping either would be a guess) and for a
    Timestamp that is not an RFC 3339 string."""
    return _struct(_plan(params_type), params, "")


@functools.cache
def _plan(cls: type[msgspec.Struct]) -> _Plan:
    # Eager, through every nested struct: a2a.proto's messages are not recursive (Struct and
    # Value, the recursive ones, are free-form here).
    info = mi.type_info(cls)
    assert isinstance(info, mi.StructType)
    fields = info.fields
    json_names = {field.encode_name for field in fields}
    return _Plan(
        renames={
            field.name: field.encode_name
            for field in fields
            # A proto name that is another field's JSON name stays that field's.
            if field.name != field.encode_name and field.name not in json_names
        },
        children=tuple(
            (field.encode_name, walk)
            for field in fields
            if (walk := _walker(field.type)) is not None
        ),
    )


def _walker(t: mi.Type) -> Walk | None:
    """How to walk a value of type ``t``; None when nothing in it can need a change (scalars,
    free-form values, structs whose names are all one word)."""
    if isinstance(t, mi.StructType):
        plan = _plan(t.cls)
        return functools.partial(_struct, plan) if plan.renames or plan.children else None
    if isinstance(t, mi.ListType | mi.VarTupleType | mi.SetType | mi.FrozenSetType):
        item = _walker(t.item_type)
        return None if item is None else functools.partial(_items, item)
    if isinstance(t, mi.DictType):  # a map: its keys are data, its values may be messages
        value = _walker(t.value_type)
        return None if value is None else functools.partial(_values, value)
    if isinstance(t, mi.UnionType):
        return _union([member for member in t.types if not isinstance(member, mi.NoneType)])
    if isinstance(t, mi.Metadata):
        return _walker(t.type)
    if isinstance(t, mi.DateTimeType):
        return _timestamp
    return None


def _union(members: list[mi.Type]) -> Walk | None:
    if len(members) == 1:
        return _walker(members[0])
    structs = [member for member in members if isinstance(member, mi.StructType)]
    if len(structs) == len(members):
        # msgspec decodes a union of structs by their tag, so the walk picks the plan by it too.
        plans = {struct.tag: _plan(struct.cls) for struct in structs}
        return functools.partial(_tagged, structs[0].tag_field, plans)
    if any(_walker(member) is not None for member in members):
        # A proto field never has such a type: each member of a oneof is a field of its own.
        raise TypeError(f"No ProtoJSON walk for a union of {members}")
    return None


def _struct(plan: _Plan, value: Any, path: str) -> Any:
    if not isinstance(value, dict):
        return value  # msgspec names the wrong type
    out = value
    if plan.renames and not plan.renames.keys().isdisjoint(value):
        out = dict(value)
        for proto_name, json_name in plan.renames.items():
            if proto_name in out:
                if json_name in out:
                    raise InvalidParamsError(
                        field=_join(path, json_name),
                        description=f"{json_name} is given twice (also as {proto_name})",
                    )
                out[json_name] = out.pop(proto_name)
    for name, walk in plan.children:
        child = out.get(name)
        if child is None:
            continue
        walked = walk(child, _join(path, name))
        if walked is not child:
            if out is value:
                out = dict(value)
            out[name] = walked
    return out


def _tagged(tag_field: str, plans: dict[Any, _Plan], value: Any, path: str) -> Any:
    tag = value.get(tag_field) if isinstance(value, dict) else None
    plan = plans.get(tag) if isinstance(tag, str | int) else None
    return value if plan is None else _struct(plan, value, path)


def _items(walk: Walk, value: Any, path: str) -> Any:
    if not isinstance(value, list):
        return value
    out = value
    for index, item in enumerate(value):
        walked = walk(item, f"{path}[{index}]")
        if walked is not item:
            if out is value:
                out = list(value)
            out[index] = walked
    return out


def _values(walk: Walk, value: Any, path: str) -> Any:
    if not isinstance(value, dict):
        return value
    out = value
    for key, item in value.items():
        walked = walk(item, _join(path, key))
        if walked is not item:
            if out is value:
                out = dict(value)
            out[key] = walked
    return out


def _timestamp(value: Any, path: str) -> Any:
    # Strict, as msgspec decodes JSON: a str in RFC 3339 only. The offset is checked later,
    # against the field's own type.
    try:
        msgspec.convert(value, datetime)
    except msgspec.ValidationError:
        raise InvalidParamsError(
            field=path, description="A Timestamp is an RFC 3339 string, e.g. 2025-01-01T00:00:00Z"
        ) from None
    return value


def _join(path: str, name: str) -> str:
    return f"{path}.{name}" if path else name
