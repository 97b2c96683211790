"""What of an answer is read aloud: plain words, no code, within the profile's limit (the first part)."""

from __future__ import annotations

from hermes_engine.voice.spoken import spoken_text


def test_markdown_marks_code_and_addresses_are_not_read_out() -> None:
    answer = "# Plan\n**First** run `make`, see [the docs](https://x.io/d):\n```sh\nmake all\n```\nDone: https://x.io"
    assert spoken_text(answer, 1000) == "Plan\nFirst run make, see the docs:\nDone:"


def test_a_long_answer_is_spoken_up_to_its_last_sentence_end_within_the_limit() -> None:
    answer = "One sentence here. Another one follows. " * 20
    spoken = spoken_text(answer, 100)
    assert len(spoken) <= 100 and spoken.endswith(".")
    assert spoken.startswith("One sentence here. Another one follows.")


def test_a_sentence_longer_than_the_limit_is_cut_at_a_space() -> None:
    spoken = spoken_text("word " * 100, 52)
    assert len(spoken) <= 52 and spoken.endswith("word") and "  " not in spoken


def test_an_answer_of_code_alone_has_nothing_to_speak() -> None:
    assert spoken_text("```python\nprint(1)\n```", 1000) == ""
