"""Tool-call arguments as the session keeps them: redacted, and still JSON where the model wrote JSON."""

from __future__ import annotations

import json

from hermes_engine.agent.tool_record import redacted_arguments
from hermes_engine.secrets import REDACTED


def test_a_secret_named_by_its_key_is_redacted_in_the_arguments():
    arguments = json.dumps({"api_key": "abc12345xyz", "text": "key sk-proj-Ab3dE5gH7jK9mN1pQ3sT5vX7zB9"})
    assert json.loads(redacted_arguments(arguments)) == {"api_key": REDACTED, "text": f"key {REDACTED}"}


def test_arguments_stay_json_when_a_match_would_cross_a_quote():
    arguments = '{"u":"http://a:bcd","x":["e@f"],"k":"sk-proj-Ab3dE5gH7jK9mN1pQ3sT5vX7zB9"}'
    assert json.loads(redacted_arguments(arguments)) == {"u": "http://a:bcd", "x": ["e@f"], "k": REDACTED}


def test_arguments_without_secrets_keep_their_bytes():
    arguments = '{"expression":"6*7"}'
    assert redacted_arguments(arguments) == arguments


def test_arguments_that_are_not_json_are_redacted_as_text():
    assert redacted_arguments("key sk-proj-Ab3dE5gH7jK9mN1pQ3sT5vX7zB9 {") == f"key {REDACTED} {{"
