"""The console outlet: what a person at a terminal sees."""

from __future__ import annotations

import io

from adapters.console import ConsoleOutlet
from hermes_engine.ports.inbound import ReplyTarget

TARGET = ReplyTarget("console", "local", "terminal")


async def test_a_rewound_answer_says_it_starts_again_instead_of_gluing_two_answers() -> None:
    out = io.StringIO()
    stream = ConsoleOutlet(out, interactive=True).open_stream(TARGET, idempotency_key="e1:reply")
    await stream.push("The capi")
    await stream.rewind()
    await stream.push("The capital is Paris.")
    await stream.finish("The capital is Paris.")
    assert out.getvalue() == "The capi\n[the model's answer broke off; it starts again]\nThe capital is Paris.\n"
