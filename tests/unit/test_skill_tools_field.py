"""Front matter `tools`: the names of the tools a skill's steps call, validated as tool names, each once;
a name this bot lacks is kept (flagged when viewed, not refused)."""

from __future__ import annotations

import pytest

from hermes_engine.skills.model import MAX_TOOLS, SkillError, parse_skill

HEAD = "---\nname: run-report\ndescription: Run the report.\n"
BODY = "---\n\n## When to use\nx\n\n## Steps\n1. y\n\n## Pitfalls\n- z\n"


def test_tools_are_tool_names_kept_in_order_once_each_unknown_ones_included():
    skill = parse_skill(HEAD + "tools: [terminal, write_file, terminal, some_future_tool]\n" + BODY)
    assert skill.tools == ("terminal", "write_file", "some_future_tool")
    assert parse_skill(HEAD + BODY).tools == ()


@pytest.mark.parametrize("value, message", [
    ("[\"rm -rf /\"]", "not a tool name"),
    ("{a: 1}", "must be a list"),
    ("[" + ", ".join(f"t{i}" for i in range(MAX_TOOLS + 1)) + "]", f"at most {MAX_TOOLS}"),
])
def test_a_tools_entry_that_is_not_a_list_of_tool_names_is_refused_with_the_reason(value, message):
    with pytest.raises(SkillError, match=message):
        parse_skill(HEAD + f"tools: {value}\n" + BODY)
