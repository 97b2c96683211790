"""A tool's declared arguments, checked and coerced before the call.

Models now and then send `"1"` for an integer or `"true"` for a flag. Taken as it came, such a value reaches
the tool as the wrong type and fails in a way that misleads (a worker told it may not change its own card
"1"). So each tool gets one pydantic validator, built with the tool, from the declaration the model was
shown: a built-in tool's signature, or the JSON schema of a tool declared by one alone (an MCP server's,
a session's frozen list). Pydantic's lax mode coerces what loses nothing (`"1"` → 1, `"true"` → True,
5 → "5" for a string); a value it cannot coerce, a missing required argument and an unknown one are named
in one error for the model, and the tool is not called.

Only the arguments given are passed on, so one left out keeps the tool's own default; a null given for an
optional argument that does not take null counts as left out (models send it to mean "none"). At the top
level only declared arguments are taken, unless the schema allows more: an unknown one is a mistake the
model should hear about. Objects inside the arguments keep the keys their schema does not name unless it
says `additionalProperties: false`, as JSON Schema means, so a free-form object loses nothing.
"""

from __future__ import annotations

import json
import re
import typing
from collections.abc import Iterable
from typing import Any, Literal, NotRequired, Required

from pydantic import ConfigDict, TypeAdapter, ValidationError
from pydantic_core import ErrorDetails
from typing_extensions import TypedDict  # pydantic takes typing's only from Python 3.12 on

from hermes_engine.errors import MalformedToolArguments

SCALARS: dict[str, type] = {"string": str, "integer": int, "number": float, "boolean": bool, "null": type(None)}
MAX_SHOWN = 80  # characters of a refused value quoted back to the model
_new_typed_dict: Any = TypedDict  # its fields are known only at run time, which type checkers cannot follow


def _shape(name: str, fields: dict[str, Any], required: Iterable[str], *, extra: bool) -> Any:
    """A TypedDict (its keys may be any string: `json`, `my-key`, `_id`) for pydantic to validate."""
    wanted = set(required)
    shape = _new_typed_dict(re.sub(r"\W", "_", name) or "arguments",
                            {key: (Required if key in wanted else NotRequired)[kind] for key, kind in fields.items()})
    shape.__pydantic_config__ = ConfigDict(extra="allow" if extra else "forbid", coerce_numbers_to_str=True)
    return shape


class Arguments:
    """What one tool takes, as a validator built once; `check` gives the arguments to call it with."""

    def __init__(self, tool: str, fields: dict[str, Any], required: Iterable[str], *, extra: bool = False) -> None:
        self.tool = tool
        self.required = frozenset(required)
        self.names = tuple(fields)
        self._adapter: TypeAdapter[dict[str, Any]] = TypeAdapter(_shape(tool, fields, self.required, extra=extra))

    @classmethod
    def of_schema(cls, tool: str, schema: dict[str, Any]) -> Arguments:
        """For a tool declared by a JSON schema alone."""
        properties = schema.get("properties")
        properties = properties if isinstance(properties, dict) else {}
        fields = {key: _python_type(sub, schema, f"{tool}.{key}", ()) for key, sub in properties.items()}
        return cls(tool, fields, _required(schema, fields),
                   extra=schema.get("additionalProperties", False) not in (False, None))

    def check(self, given: dict[str, Any]) -> dict[str, Any]:
        """The arguments coerced to their declared types; `MalformedToolArguments` naming each wrong one."""
        try:
            return self._adapter.validate_python(given)
        except ValidationError as exc:
            errors = exc.errors(include_url=False)
        nulls = {err["loc"][0] for err in errors if _is_null_for_optional(err, given, self.required)}
        if nulls:
            return self.check({key: value for key, value in given.items() if key not in nulls})
        raise MalformedToolArguments(self._explain(errors, given))

    def _explain(self, errors: list[ErrorDetails], given: dict[str, Any]) -> str:
        problems: dict[str, list[str]] = {}
        for err in errors:
            name = str(err["loc"][0]) if err["loc"] else "arguments"
            if err["type"] == "missing":
                text = "required, but missing"
            elif err["type"] == "extra_forbidden":
                text = (f"not an argument of {self.tool} (it takes {', '.join(self.names) or 'none'})"
                        if len(err["loc"]) == 1 else "not a key this object takes")
            else:
                shown = json.dumps(err["input"], ensure_ascii=False, default=str)
                shown = shown if len(shown) <= MAX_SHOWN else shown[: MAX_SHOWN - 1] + "…"
                text = f"{err['msg'].removeprefix('Input ')} (given {shown})"
            place = _place(err["loc"], given)
            text = f"at {place}, {text}" if place else text
            if text not in problems.setdefault(name, []):
                problems[name].append(text)
        lines = "\n".join(f"- {name}: {'; '.join(texts)}" for name, texts in problems.items())
        return f"Error: {self.tool} was not called, as its arguments do not fit its schema:\n{lines}"


def _is_null_for_optional(err: ErrorDetails, given: dict[str, Any], required: frozenset[str]) -> bool:
    loc = err["loc"]
    return bool(loc) and loc[0] not in required and loc[0] in given and given[str(loc[0])] is None


def _place(loc: tuple[int | str, ...], given: dict[str, Any]) -> str:
    """Where inside an argument a problem is (`[2]`, `["items"][0]`); the names of union branches that
    pydantic puts in the location are not places in the value, and are left out."""
    value: Any = given.get(str(loc[0])) if loc else None
    path = ""
    for i, step in enumerate(loc[1:], start=2):
        if isinstance(value, dict) and (step in value or (i == len(loc) and isinstance(step, str))):
            value, path = value.get(step), f"{path}[{json.dumps(step)}]"
        elif isinstance(value, list) and isinstance(step, int) and 0 <= step < len(value):
            value, path = value[step], f"{path}[{step}]"
    return path


def _python_type(schema: Any, root: dict[str, Any], name: str, seen: tuple[str, ...]) -> Any:
    """The Python type pydantic validates a JSON-schema value with; `Any` for what it does not model.

    The converters on PyPI make `BaseModel` classes instead: their field names clash with arguments such
    as `json`, `schema`, `copy` or `model_config`, they hand back models to turn into JSON again, and one policy
    for unknown keys applies to every nested object. A TypedDict has none of these, and tools use few of
    JSON Schema's words: types, properties, required, additionalProperties, items, enum, const, anyOf,
    oneOf and local `$ref`s."""
    if not isinstance(schema, dict):
        return Any
    ref = schema.get("$ref")
    if isinstance(ref, str):
        target = _resolve(ref, root)
        return Any if target is None or ref in seen else _python_type(target, root, name, (*seen, ref))
    if "const" in schema:
        return Literal[schema["const"]] if _is_scalar(schema["const"]) else Any
    if isinstance(schema.get("enum"), list) and schema["enum"]:
        return Literal[tuple(schema["enum"])] if all(_is_scalar(v) for v in schema["enum"]) else Any
    for key in ("anyOf", "oneOf"):
        if isinstance(schema.get(key), list) and schema[key]:
            return _union(_python_type(sub, root, f"{name}.{i}", seen) for i, sub in enumerate(schema[key]))
    kind = schema.get("type")
    if isinstance(kind, list) and kind:
        return _union(_python_type({**schema, "type": k}, root, name, seen) for k in kind)
    if kind == "array" or (kind is None and "items" in schema):
        items = schema.get("items")
        item: Any = _python_type(items, root, f"{name}.items", seen) if isinstance(items, dict) else Any
        return list[item]
    if kind == "object" or (kind is None and "properties" in schema):
        return _object(schema, root, name, seen)
    return SCALARS.get(kind, Any) if isinstance(kind, str) else Any


def _object(schema: dict[str, Any], root: dict[str, Any], name: str, seen: tuple[str, ...]) -> Any:
    properties = schema.get("properties")
    if not isinstance(properties, dict) or not properties:
        return dict[str, Any]
    fields = {key: _python_type(sub, root, f"{name}.{key}", seen) for key, sub in properties.items()}
    return _shape(name, fields, _required(schema, fields), extra=schema.get("additionalProperties") is not False)


def _required(schema: dict[str, Any], fields: dict[str, Any]) -> list[str]:
    listed = schema.get("required")
    return [key for key in listed if isinstance(key, str) and key in fields] if isinstance(listed, list) else []


def _union(kinds: Iterable[Any]) -> Any:
    members = tuple(dict.fromkeys(kinds))
    return Any if Any in members else typing.Union[members]  # noqa: UP007 (a tuple of members, made at run time)


def _is_scalar(value: Any) -> bool:
    return value is None or isinstance(value, str | int | float | bool)


def _resolve(ref: str, root: dict[str, Any]) -> Any:
    """A local reference (`#/$defs/Item`); None for any other."""
    if not ref.startswith("#/"):
        return None
    node: Any = root
    for part in ref[2:].split("/"):
        part = part.replace("~1", "/").replace("~0", "~")
        if not isinstance(node, dict) or part not in node:
            return None
        node = node[part]
    return node
