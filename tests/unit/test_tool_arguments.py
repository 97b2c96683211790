"""Tool arguments are checked against the tool's declared types before the call, through the registry as the
agent loop calls it: coerced where pydantic's lax mode loses nothing, refused with one error naming each
argument that does not fit (and the tool not called) where it cannot."""

from __future__ import annotations

import json
from typing import Any

import pytest

from hermes_engine.memory import MemoryFeature, MemoryOwner
from hermes_engine.memory.store import InMemoryStore
from hermes_engine.ports.conversation import ToolCall
from hermes_engine.ports.services import Services
from hermes_engine.ports.tools import ToolContext, ToolResult
from hermes_engine.tools.registry import FunctionTool, ToolRegistry, tool


def _ctx() -> ToolContext:
    return ToolContext(bot="b", session_id=1, session_key="k")


async def _call(registry: ToolRegistry, name: str, **arguments: Any) -> ToolResult:
    return await registry.call(ToolCall(id="c1", name=name, arguments=json.dumps(arguments)), _ctx())


def recording() -> tuple[ToolRegistry, list[dict[str, Any]]]:
    """A registry with `finish`, a built-in tool that records the arguments it was called with."""
    calls: list[dict[str, Any]] = []

    @tool(toolset="test")
    async def finish(card_id: int, result: str, urgent: bool = False, note: str = "none",
                     children: list[str] | None = None, *, ctx: ToolContext) -> str:
        """Finish a card."""
        calls.append({"card_id": card_id, "result": result, "urgent": urgent, "note": note, "children": children})
        return "finished"

    return ToolRegistry([finish]), calls


async def test_a_string_card_id_is_coerced_to_the_integer_it_names():
    registry, calls = recording()
    outcome = await _call(registry, "finish", card_id="1", result="done")
    assert not outcome.is_error and calls[0]["card_id"] == 1 and isinstance(calls[0]["card_id"], int)


async def test_a_true_string_reaches_a_flag_as_true_and_a_number_reaches_a_string_as_its_text():
    registry, calls = recording()
    await _call(registry, "finish", card_id=1, result=42, urgent="true", children=[7, "b"])
    assert calls == [{"card_id": 1, "result": "42", "urgent": True, "note": "none", "children": ["7", "b"]}]


async def test_optional_arguments_left_out_keep_their_defaults_and_a_null_for_one_counts_as_left_out():
    registry, calls = recording()
    await _call(registry, "finish", card_id=1, result="r")
    await _call(registry, "finish", card_id=1, result="r", note=None, urgent=None)
    assert calls[0] == calls[1] == {"card_id": 1, "result": "r", "urgent": False, "note": "none", "children": None}


@pytest.mark.parametrize(("arguments", "named"), [
    ({"card_id": "one", "result": "r"},
     '- card_id: should be a valid integer, unable to parse string as an integer (given "one")'),
    ({"card_id": 1}, "- result: required, but missing"),
    ({"card_id": 1, "result": "r", "reason": "x"},
     "- reason: not an argument of finish (it takes card_id, result, urgent, note, children)"),
    ({"card_id": 1, "result": None}, "- result: should be a valid string (given null)"),
    ({"card_id": 1, "result": "r", "children": ["a", {"b": 1}]},
     '- children: at [1], should be a valid string (given {"b": 1})'),
])
async def test_an_argument_that_does_not_fit_is_named_in_one_error_and_the_tool_is_not_called(arguments, named):
    registry, calls = recording()
    outcome = await registry.call(ToolCall(id="c1", name="finish", arguments=json.dumps(arguments)), _ctx())
    assert outcome.is_error and calls == []
    assert outcome.content == f"Error: finish was not called, as its arguments do not fit its schema:\n{named}"


async def test_every_argument_that_does_not_fit_is_named_in_the_same_error():
    registry, calls = recording()
    outcome = await _call(registry, "finish", card_id="one", urgent="perhaps", extra=1)
    lines = outcome.content.splitlines()[1:]
    assert [line.split(":", 1)[0] for line in lines] == ["- card_id", "- result", "- urgent", "- extra"]
    assert calls == []


def schema_tool(parameters: dict[str, Any]) -> tuple[ToolRegistry, list[dict[str, Any]]]:
    """A tool declared by its JSON schema alone, as an MCP server's is, that records what it was given."""
    calls: list[dict[str, Any]] = []

    async def run(**arguments: Any) -> str:
        arguments.pop("_ctx")
        calls.append(arguments)
        return "ok"

    return ToolRegistry([FunctionTool("remote", "A remote tool.", parameters, run, "mcp:x", "_ctx")]), calls


async def test_a_tool_declared_by_json_schema_alone_is_checked_against_its_properties():
    registry, calls = schema_tool({"type": "object", "required": ["count"], "properties": {
        "count": {"type": "integer"}, "ratio": {"type": "number"}, "label": {"type": "string"},
        "tags": {"type": "array", "items": {"type": "string"}}, "mode": {"enum": ["fast", "slow"]},
        "when": {"anyOf": [{"type": "integer"}, {"type": "null"}]}}})
    assert not (await _call(registry, "remote", count="5", ratio="0.5", label=3, tags=[1], when="7")).is_error
    assert not (await _call(registry, "remote", count=2)).is_error
    assert calls == [{"count": 5, "ratio": 0.5, "label": "3", "tags": ["1"], "when": 7}, {"count": 2}]
    refused = await _call(registry, "remote", count="many", mode="medium", colour="red")
    assert refused.is_error and calls[2:] == []
    assert refused.content.splitlines()[1:] == [
        '- count: should be a valid integer, unable to parse string as an integer (given "many")',
        "- mode: should be 'fast' or 'slow' (given \"medium\")",
        "- colour: not an argument of remote (it takes count, ratio, label, tags, mode, when)"]


async def test_free_form_objects_keep_every_key_and_only_a_closed_object_refuses_one():
    registry, calls = schema_tool({"type": "object", "properties": {
        "options": {"type": "object"},
        "filter": {"type": "object", "properties": {"limit": {"type": "integer"}}},
        "point": {"$ref": "#/$defs/Point"}},
        "$defs": {"Point": {"type": "object", "properties": {"x": {"type": "integer"}}, "required": ["x"],
                            "additionalProperties": False}}})
    given = {"options": {"any": {"nested": [1, "two"]}}, "filter": {"limit": "3", "sort": "name"}, "point": {"x": "1"}}
    assert not (await _call(registry, "remote", **given)).is_error
    assert calls == [{"options": {"any": {"nested": [1, "two"]}}, "filter": {"limit": 3, "sort": "name"},
                      "point": {"x": 1}}]
    refused = await _call(registry, "remote", point={"y": 2})
    assert refused.content.splitlines()[1:] == ['- point: at ["x"], required, but missing; at ["y"], not a key this '
                                                "object takes"]


async def test_a_schema_that_allows_more_arguments_passes_them_on():
    registry, calls = schema_tool({"type": "object", "properties": {"n": {"type": "integer"}},
                                   "additionalProperties": True})
    assert not (await _call(registry, "remote", n="1", more={"a": 1})).is_error
    assert calls == [{"n": 1, "more": {"a": 1}}]



async def test_a_memory_target_or_operation_its_declared_types_refuse_is_named_and_nothing_is_written():
    store = InMemoryStore()
    feature = MemoryFeature(store)
    ctx = ToolContext(bot="b", session_id=1, session_key="k", person_id=1, services=Services(feature.services()))
    registry = ToolRegistry(feature.tools())
    target = await registry.call(ToolCall(id="c1", name="memory", arguments=json.dumps(
        {"action": "add", "target": "diary", "content": "Likes tea"})), ctx)
    operations = await registry.call(ToolCall(id="c2", name="memory", arguments=json.dumps(
        {"target": "memory", "operations": ["add: Likes tea"]})), ctx)
    assert target.content.splitlines()[1:] == ["- target: should be 'memory', 'user' or 'shared' (given \"diary\")"]
    assert operations.content.splitlines()[1:] == ['- operations: at [0], should be a valid dictionary (given '
                                                   '"add: Likes tea")']
    assert store.documents == {} and await store.read(MemoryOwner.person(1), "memory") == []
