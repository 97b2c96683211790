"""The scripted model of the learning curve: a fixed policy that reads only what the engine sends it.

- A task request: if the user message names skills (the engine's hint), load them with skill_view, one at a
  time, until one fits the task (its "When to use" describes it); then do the lookups its steps name and
  answer. With no fitting skill it explores: the orientation lookups, then the procedure, then answers.
  The index in the system prompt is not scanned, so the curve measures the hints.
- A background review (recognised by its prompt): if the conversation holds a task that took five or more
  tool calls without a fitting skill, it saves the family's procedure with skill_manage; otherwise
  "Nothing to save.".

The policy is the same with the engine's loops on and off; only what the engine sends differs.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from typing import Any

from environment import Family, family_of
from fakes.fake_llm import RecordedRequest, Reply

REVIEW = "[Background review"
SKILL_NAMES = re.compile(r"\b[a-z0-9]+(?:-[a-z0-9]+)+\b")
STEP_KEY = re.compile(r"`([^`]+)`")
MAX_VIEWS = 2  # hinted skills the model loads before it gives up on them and explores
REVIEW_MIN_CALLS = 5


@dataclass
class Done:
    """One tool call of this turn and its result."""

    name: str
    args: dict[str, Any]
    result: str


def text_of(content: Any) -> str:
    if isinstance(content, list):
        return "\n".join(str(b.get("text", "")) for b in content if isinstance(b, dict))
    return str(content or "")


def _turn_start(messages: list[dict[str, Any]]) -> int:
    return max(i for i, m in enumerate(messages) if m["role"] == "user")


def calls_since(messages: list[dict[str, Any]], start: int) -> list[Done]:
    """The tool calls after `messages[start]`, with their results (OpenAI wire format)."""
    results = {m.get("tool_call_id"): text_of(m.get("content")) for m in messages[start:] if m["role"] == "tool"}
    done = []
    for m in messages[start:]:
        for call in m.get("tool_calls") or []:
            fn = call.get("function", {})
            try:
                args = json.loads(fn.get("arguments") or "{}")
            except ValueError:
                args = {}
            done.append(Done(fn.get("name", ""), args, results.get(call.get("id"), "")))
    return done


def fits(family: Family, skill_text: str) -> bool:
    when = skill_text.split("## When to use", 1)[-1].split("##", 1)[0].lower()
    return family.marker in when


def steps_of(skill_text: str, family: Family, subject: str) -> list[str]:
    steps = skill_text.split("## Steps", 1)[-1].split("##", 1)[0]
    return [k.replace(family.placeholder, subject) for k in STEP_KEY.findall(steps)]


def _lookup(key: str) -> Reply:
    return Reply(tool_calls=[("lookup", {"key": key})])


def task_reply(request: RecordedRequest) -> Reply:
    messages = request.messages
    start = _turn_start(messages)
    user_text = request.last_user_text
    found = family_of(user_text)
    if found is None:
        return Reply(text="ok")
    family, subject = found
    done = calls_since(messages, start)
    looked_up = {str(d.args.get("key")) for d in done if d.name == "lookup"}
    views = [d for d in done if d.name == "skill_view"]
    followed = next((v for v in views if fits(family, v.result)), None)
    if followed is not None:
        plan = steps_of(followed.result, family, subject)
    else:
        viewed = {str(v.args.get("name")) for v in views}
        hinted = [n for n in SKILL_NAMES.findall(user_text) if n not in viewed]
        if hinted and len(views) < MAX_VIEWS:
            return Reply(tool_calls=[("skill_view", {"name": hinted[0]})])
        plan = family.exploration(subject)
    remaining = [k for k in plan if k not in looked_up]
    if remaining:
        return _lookup(remaining[0])
    return Reply(text=family.answer.format(s=subject))


def review_reply(request: RecordedRequest) -> Reply:
    messages = request.messages
    start = _turn_start(messages)
    if calls_since(messages, start):
        return Reply(text="Saved.")
    for i, m in enumerate(messages[:start]):
        if m["role"] != "user":
            continue
        found = family_of(text_of(m.get("content")))
        if found is None:
            continue
        family = found[0]
        end = next((j for j in range(i + 1, start) if messages[j]["role"] == "user"), start)
        work = calls_since(messages[:end], i)
        if any(d.name == "skill_view" and fits(family, d.result) for d in work) or len(work) < REVIEW_MIN_CALLS:
            continue
        return Reply(tool_calls=[("skill_manage", {"action": "create", "name": family.skill_name,
                                                   "content": family.skill_md(), "category": family.category})])
    return Reply(text="Nothing to save.")


def respond(request: RecordedRequest) -> Reply:
    """The fake LLM's responder for the whole suite."""
    if REVIEW in request.last_user_text:
        return review_reply(request)
    return task_reply(request)


__all__ = ["REVIEW", "calls_since", "fits", "respond", "review_reply", "steps_of", "task_reply"]
