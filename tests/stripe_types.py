"""Stripe's published types, to hold what the Stripe stand-in answers and the events it and the
samples make to them: each object is read against the class the pinned stripe-python generates
from Stripe's OpenAPI document for it (its fields, their types, `Literal` enums, `Optional`
nullability, `ExpandableField` ids or objects, `ListObject` pages) and against the fields Stripe's
own fixtures (tests/fixtures/stripe/fixtures3.json) always carry.

`problems(obj)` names every difference, as a path and what is wrong there:
- a field the SDK does not know (one a version removed, or never had);
- a field Stripe always sends that is missing (a key of the resource's fixture the SDK also
  declares; of a `type`-tagged sub-object, only the variant its `type` names);
- a value of the wrong type, null where the SDK never has null, or outside an enum.

Objects of preview APIs, outside the pinned SDK, are not validated: PREVIEW_OBJECTS lists them.
An event at another API version than the SDK's is held to the Event's own fields only (its
object is shaped by that version, which the SDK does not describe).
"""

from __future__ import annotations

import ast
import decimal
import functools
import importlib
import inspect
import json
import sys
import types
import typing
from collections.abc import Mapping
from pathlib import Path
from typing import Any, ForwardRef, Literal, Union

import stripe
from stripe._list_object import ListObject
from stripe._object_classes import get_object_class
from stripe._stripe_object import StripeObject, UntypedStripeObject

SDK_API_VERSION: str = stripe.api_version
FIXTURES_PATH = Path(__file__).resolve().parent / "fixtures" / "stripe" / "fixtures3.json"
FIXTURES: dict[str, Any] = json.loads(FIXTURES_PATH.read_text())["resources"]
# Objects of Stripe's preview APIs that the service calls, which the pinned SDK has no class for
# (the service calls them raw, under a `.preview` API version): not validated here.
PREVIEW_OBJECTS = {
    "privacy.redaction_job": "Redaction jobs (Privacy), a preview API",
}
_NONE = type(None)
_SCALARS = (str, int, float, bool, decimal.Decimal)
_CLASS_VAR: Any = typing.ClassVar
_FIELDS: dict[type, dict[str, Any]] = {}


def problems(obj: Any, *, where: str = "") -> list[str]:
    """What in `obj` (an object, a list of them, or an event, as Stripe answers or sends it)
    differs from Stripe's published types; empty when nothing does."""
    found: list[str] = []
    if not isinstance(obj, Mapping):
        return [f"{where or '.'}: not a JSON object"]
    if "error" in obj and "object" not in obj:
        return []  # an error answer: not a resource
    kind = obj.get("object")
    where = where or str(kind)
    if kind == "list":
        _check_page(obj, None, where, found)
        return found
    if kind == "event":
        _check_event(obj, where, found)
        return found
    _check_resource(obj, where, found)
    return found


def _check_event(event: Mapping[str, Any], where: str, found: list[str]) -> None:
    from stripe._event import Event

    data = event.get("data")
    envelope = dict(event) | {"data": {}}
    _check_object(envelope, Event, where, FIXTURES["event"], found, skip_nested={"data"})
    if not isinstance(data, Mapping) or not isinstance(data.get("object"), Mapping):
        found.append(f"{where}.data.object: missing")
        return
    extra = set(data) - {"object", "previous_attributes"}
    for key in sorted(extra):
        found.append(f"{where}.data.{key}: not a field of an event's data")
    obj = data["object"]
    event_type = str(event.get("type"))
    previous = data.get("previous_attributes")
    if previous is not None and not event_type.endswith(".updated"):
        found.append(
            f"{where}.data.previous_attributes: Stripe sends it with `*.updated` events only,"
            f" not with {event_type}"
        )
    if event.get("api_version") != SDK_API_VERSION:
        return  # shaped by another version than the one the SDK describes
    _check_resource(obj, f"{where}.data.object", found)
    cls = _class_of(obj.get("object"))
    if isinstance(previous, Mapping) and cls is not None:
        known = _fields(cls)
        for key in sorted(set(previous) - set(known)):
            found.append(
                f"{where}.data.previous_attributes.{key}: not a field of {obj.get('object')}"
            )


def _check_resource(obj: Mapping[str, Any], where: str, found: list[str]) -> None:
    kind = obj.get("object")
    if kind in PREVIEW_OBJECTS:
        return
    cls = _class_of(kind, obj.get("type"))
    if cls is None:
        found.append(f"{where}: no object `{kind}` in stripe-python {stripe.VERSION}")
        return
    _check_object(obj, cls, where, FIXTURES.get(str(kind)), found)


def _class_of(kind: Any, event_type: Any = None) -> type[StripeObject] | None:
    if not isinstance(kind, str):
        return None
    if kind == "v2.core.event" and isinstance(event_type, str):
        # A thin event is typed by its `type`: its `related_object` and fetched `data`.
        from stripe.events._event_classes import get_v2_event_class

        typed: type[StripeObject] = get_v2_event_class(event_type)
        if typed is not StripeObject:
            return typed
    cls = get_object_class("V2" if kind.startswith("v2.") else "V1", kind)
    return None if cls is StripeObject else cls


def _fields(cls: type) -> dict[str, Any]:
    """The typed attributes a generated class declares (its own and its generated bases')."""
    if cls not in _FIELDS:
        _FIELDS[cls] = _declared(cls)
    return _FIELDS[cls]


def _declared(cls: type) -> dict[str, Any]:
    fields: dict[str, Any] = {}
    for base in reversed(cls.__mro__):
        if base is StripeObject or not issubclass(base, StripeObject):
            continue
        for name, annotation in inspect.get_annotations(base).items():
            if name.startswith("_") or typing.get_origin(annotation) is _CLASS_VAR:
                continue
            if isinstance(annotation, str) and annotation.startswith("ClassVar"):
                continue
            fields[name] = annotation
    return fields


@functools.cache
def _typing_imports(module_name: str) -> dict[str, tuple[str, str]]:
    """The names a generated module imports only for type checkers (alias: module, name)."""
    module = sys.modules[module_name]
    tree = ast.parse(inspect.getsource(module))
    found: dict[str, tuple[str, str]] = {}
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom) and node.module:
            for alias in node.names:
                found[alias.asname or alias.name] = (node.module, alias.name)
    return found


def _resolve(ref: str, owner: type) -> Any:
    head, *rest = ref.split(".")
    module = sys.modules[owner.__module__]
    if hasattr(module, head):
        found = getattr(module, head)
    else:
        module_name, name = _typing_imports(owner.__module__)[head]
        found = getattr(importlib.import_module(module_name), name)
    for part in rest:
        found = getattr(found, part)
    return found


def _check_object(
    obj: Mapping[str, Any],
    cls: type,
    where: str,
    fixture: Any,
    found: list[str],
    *,
    skip_nested: frozenset[str] | set[str] = frozenset(),
) -> None:
    fields = _fields(cls)
    name = getattr(cls, "OBJECT_NAME", None)
    if name is not None and obj.get("object") not in (None, name):
        found.append(f"{where}.object: {obj.get('object')!r}, not {name!r}")
    for key in sorted(set(obj) - set(fields)):
        found.append(
            f"{where}.{key}: not a field of {cls.__qualname__} in stripe-python {stripe.VERSION}"
            f" (API {SDK_API_VERSION})"
        )
    template = fixture if isinstance(fixture, Mapping) else {}
    chosen = obj.get("type")
    variants = _literals(fields["type"]) if "type" in fields else set()
    for key in sorted(set(template) & set(fields) - set(obj)):
        if key in variants and key != chosen:
            continue  # the sub-object of another `type` than this one's
        found.append(f"{where}.{key}: missing; Stripe always sends it")
    for key in sorted(set(obj) & set(fields) - set(skip_nested)):
        _check(obj[key], fields[key], cls, f"{where}.{key}", template.get(key), found)


def _literals(annotation: Any) -> set[Any]:
    if typing.get_origin(annotation) is Literal:
        return set(typing.get_args(annotation))
    values: set[Any] = set()
    for arg in typing.get_args(annotation):
        values |= _literals(arg)
    return values


def _check(value: Any, tp: Any, owner: type, where: str, fixture: Any, found: list[str]) -> None:
    if isinstance(tp, ForwardRef):
        tp = tp.__forward_arg__
    if isinstance(tp, str):
        tp = _resolve(tp, owner)
    if tp is Any:
        return
    origin = typing.get_origin(tp)
    args = typing.get_args(tp)
    if origin in (Union, types.UnionType):
        _check_union(value, args, owner, where, fixture, found)
    elif value is None:
        found.append(f"{where}: null, where stripe-python never has null")
    elif origin is Literal:
        if value not in args:
            found.append(f"{where}: {value!r}, not one of {sorted(map(str, args))}")
    elif origin in (list, typing.List):  # noqa: UP006 - the SDK's own spelling
        if not isinstance(value, list):
            found.append(f"{where}: {type(value).__name__}, not a list")
            return
        first = fixture[0] if isinstance(fixture, list) and fixture else None
        for n, item in enumerate(value):
            _check(item, args[0], owner, f"{where}[{n}]", first, found)
    elif origin in (dict, typing.Dict) or origin is UntypedStripeObject:  # noqa: UP006
        if not isinstance(value, dict):
            found.append(f"{where}: {type(value).__name__}, not an object")
            return
        for key, item in value.items():
            _check(item, args[-1] if args else Any, owner, f"{where}.{key}", None, found)
    elif origin is ListObject:
        _check_page(value, (args[0], owner), where, found)
    elif inspect.isclass(tp) and issubclass(tp, StripeObject):
        if not isinstance(value, dict):
            found.append(f"{where}: {type(value).__name__}, not an object")
            return
        kind = getattr(tp, "OBJECT_NAME", None)
        # An expanded resource is held to its own fixture; a sub-object to its parent's.
        template = FIXTURES.get(kind) if isinstance(kind, str) else fixture
        _check_object(value, tp, where, template, found)
    else:
        _check_scalar(value, tp, where, found)


def _check_union(
    value: Any, args: tuple[Any, ...], owner: type, where: str, fixture: Any, found: list[str]
) -> None:
    if value is None:
        if _NONE not in args:
            found.append(f"{where}: null, where stripe-python never has null")
        return
    enum = set().union(*(_literals(a) for a in args if typing.get_origin(a) is Literal))
    if enum and isinstance(value, str):
        if value not in enum:
            found.append(f"{where}: {value!r}, not one of {sorted(map(str, enum))}")
        return
    candidates = [a for a in args if a is not _NONE and typing.get_origin(a) is not Literal]
    if isinstance(value, (dict, list)):
        # An object or a list is judged by the candidates that can hold one (an expanded
        # object, not the id it could have been).
        candidates = [a for a in candidates if a not in _SCALARS] or candidates
    attempts: list[list[str]] = []
    for candidate in candidates:
        attempt: list[str] = []
        _check(value, candidate, owner, where, fixture, attempt)
        if not attempt:
            return
        attempts.append(attempt)
    # The closest candidate's problems (an object's field, rather than "not a string").
    if not attempts:
        found.append(f"{where}: no type accepts it")
        return
    closest: list[str] = min(attempts, key=len)
    found.extend(closest)


def _check_page(value: Any, item: tuple[Any, type] | None, where: str, found: list[str]) -> None:
    if not isinstance(value, dict) or value.get("object") != "list":
        found.append(f"{where}: not a list object")
        return
    for key in sorted(set(value) - {"object", "data", "has_more", "url"}):
        found.append(f"{where}.{key}: not a field of a list")
    for key in ("data", "has_more", "url"):
        if key not in value:
            found.append(f"{where}.{key}: missing; Stripe always sends it")
    if not isinstance(value.get("has_more"), bool):
        found.append(f"{where}.has_more: not a boolean")
    if not isinstance(value.get("url"), str):
        found.append(f"{where}.url: not a string")
    data = value.get("data")
    if not isinstance(data, list):
        found.append(f"{where}.data: not a list")
        return
    for n, obj in enumerate(data):
        if item is None:
            found.extend(problems(obj, where=f"{where}.data[{n}]"))
        else:
            _check(obj, item[0], item[1], f"{where}.data[{n}]", None, found)


def _check_scalar(value: Any, tp: Any, where: str, found: list[str]) -> None:
    ok: bool
    if tp is bool:
        ok = isinstance(value, bool)
    elif tp is int:
        ok = isinstance(value, int) and not isinstance(value, bool)
    elif tp is float:
        ok = isinstance(value, (int, float)) and not isinstance(value, bool)
    elif tp is str:
        ok = isinstance(value, str)
    elif tp is decimal.Decimal:
        # A decimal string in JSON, as Stripe sends `unit_amount_decimal`.
        ok = isinstance(value, str) and _is_decimal(value)
    else:
        return  # a type the check has no rule for: not judged
    if not ok:
        found.append(f"{where}: {value!r} is not {getattr(tp, '__name__', tp)}")


def _is_decimal(value: str) -> bool:
    try:
        decimal.Decimal(value)
    except decimal.InvalidOperation:
        return False
    return True


def recorded_problems(path: Path, start: int = 0) -> list[str]:
    """What differs from Stripe's types in the answers and events recorded in `path` (written
    by dev/stripe_record.py) from byte `start` on, each named by what said it."""
    if not path.exists():
        return []
    with path.open("rb") as file:
        file.seek(start)
        lines = file.read().splitlines()
    found: list[str] = []
    for line in lines:
        said = json.loads(line)
        where = f"{said['what']}: {said['body'].get('object', 'answer')}"
        found.extend(problems(said["body"], where=where))
    return found
