"""split_message: every part within the limit, fences balanced in every part, nothing lost."""

from __future__ import annotations

import random
import re

import pytest

from adapters.splitting import find_fences, measure, split_message, split_spans

FENCE_LINE = re.compile(r"^[ \t]*(`{3,}|~{3,})[^\n]*$")
WORDS = ["alpha", "beta", "gamma", "delta", "epsilon", "zeta", "eta", "theta", "iota", "kappa", "lambda", "mu", "nu", "xi", "omicron", "pi", "rho", "sigma", "tau", "upsilon", "phi", "chi", "psi", "omega", "the", "of", "and", "to", "in", "is", "it", "that", "for", "on", "with", "as"]
EMOJI = ["😀", "🚀", "👍🏽", "👨‍👩‍👧", "🇩🇪", "❤️", "ok", "é", "中文", "日本語"]


# --- generators ----------------------------------------------------------------------------------

def sentence(rng: random.Random) -> str:
    words = []
    for _ in range(rng.randint(3, 18)):
        roll = rng.random()
        if roll < 0.08:
            words.append(rng.choice(EMOJI))
        elif roll < 0.10:
            words.append("x" * rng.randint(30, 200))  # a long word / URL
        elif roll < 0.12:
            words.append(f"`{rng.choice(WORDS)}()`")
        elif roll < 0.14:
            words.append(f"**{rng.choice(WORDS)}**")
        else:
            words.append(rng.choice(WORDS))
    return " ".join(words).capitalize() + rng.choice([".", "!", "?", ".", "…", "。"])


def paragraph(rng: random.Random) -> str:
    return " ".join(sentence(rng) for _ in range(rng.randint(1, 8)))


def code_block(rng: random.Random, *, closed: bool = True) -> str:
    char = rng.choice(["```", "```", "~~~", "````"])
    info = rng.choice(["", "python", "js", "bash", "text title=x"])
    indent = rng.choice(["", "", "  "])
    lines = []
    for i in range(rng.randint(1, 60)):
        roll = rng.random()
        if roll < 0.1:
            lines.append("")
        elif roll < 0.15:
            lines.append("    " + "y" * rng.randint(50, 300))  # a very long code line
        elif roll < 0.2:
            lines.append(f"print('{rng.choice(EMOJI)}')  # {i}")
        else:
            lines.append(f"{'    ' * rng.randint(0, 3)}value_{i} = compute({i}, {rng.choice(WORDS)!r})")
    body = "\n".join(indent + line if line else "" for line in lines)
    block = f"{indent}{char}{info}\n{body}"
    return block + (f"\n{indent}{char}" if closed else "")


def bullet_list(rng: random.Random) -> str:
    return "\n".join(f"{'  ' * rng.randint(0, 2)}- {sentence(rng)}" for _ in range(rng.randint(2, 8)))


def document(rng: random.Random, size: int) -> str:
    blocks: list[str] = []
    total = 0
    while total < size:
        roll = rng.random()
        if roll < 0.5:
            block = paragraph(rng)
        elif roll < 0.75:
            block = code_block(rng)
        elif roll < 0.9:
            block = bullet_list(rng)
        else:
            block = "## " + sentence(rng)
        blocks.append(block)
        total += len(block)
    if rng.random() < 0.15:
        blocks.append(code_block(rng, closed=False))
    separators = ["\n\n", "\n\n", "\n", "\n\n\n", "\n  \n"]
    return "".join(block + rng.choice(separators) for block in blocks)


# --- invariants ------------------------------------------------------------------------------------

def assert_valid_split(text: str, limit: int, unit: str) -> list[str]:
    spans = split_spans(text, limit, unit)  # type: ignore[arg-type]
    parts = [p.text for p in spans]
    assert parts == split_message(text, limit, unit)  # type: ignore[arg-type]
    for part in parts:
        assert measure(part, unit) <= limit, (measure(part, unit), limit)  # type: ignore[arg-type]
        assert part.strip(), "no empty parts"
        assert all(f.closed for f in find_fences(part)), f"unbalanced fence in part:\n{part}"
    # Exact reconstruction: each part is (added fence line) + a source span + (added fence line), and
    # only whitespace lies between spans.
    cursor = 0
    for span in spans:
        assert span.text == span.prefix + text[span.start:span.end] + span.suffix
        assert span.prefix == "" or FENCE_LINE.match(span.prefix.rstrip("\n"))
        assert span.suffix == "" or FENCE_LINE.match(span.suffix.lstrip("\n"))
        assert text[cursor:span.start].strip() == "", f"lost {text[cursor:span.start]!r}"
        cursor = span.end
    assert text[cursor:].strip() == ""
    # Black-box: without fence lines, the non-whitespace content is the same, in order.
    assert content(parts) == content([text])
    return parts


def content(texts: list[str]) -> str:
    kept = [line for t in texts for line in t.split("\n") if not FENCE_LINE.match(line)]
    return re.sub(r"\s+", "", "".join(kept))


# --- properties ------------------------------------------------------------------------------------

@pytest.mark.parametrize("seed", range(80))
def test_random_documents_split_within_limit_balanced_and_lossless(seed: int) -> None:
    rng = random.Random(seed)
    unit = rng.choice(["chars", "utf16"])
    limit = rng.choice([48, 80, 200, 500, 1000, 2000, 4096])
    text = document(rng, rng.randint(100, 9000))
    assert_valid_split(text, limit, unit)


@pytest.mark.parametrize("seed", range(30))
def test_random_unstructured_text_with_long_words_and_emoji_splits_losslessly(seed: int) -> None:
    rng = random.Random(1000 + seed)
    alphabet = "ab c\n😀🇩🇪👍🏽.!`~-"
    text = "".join(rng.choice(alphabet) for _ in range(rng.randint(1, 3000)))
    assert_valid_split(text, rng.choice([40, 64, 100, 333]), rng.choice(["chars", "utf16"]))


def test_a_20k_reply_with_code_blocks_fits_telegram_4096_utf16_units() -> None:
    rng = random.Random(20)
    text = document(rng, 20_000)
    assert len(text) >= 20_000
    parts = assert_valid_split(text, 4096, "utf16")
    assert 5 <= len(parts) <= 8
    assert all(measure(p, "utf16") > 2000 for p in parts[:-1]), "parts are reasonably full"


def test_a_10k_reply_fits_discord_2000_chars() -> None:
    text = document(random.Random(10), 10_000)
    parts = assert_valid_split(text, 2000, "chars")
    assert 5 <= len(parts) <= 9


def test_a_50k_reply_fits_slack_40000_chars() -> None:
    text = document(random.Random(50), 50_000)
    parts = assert_valid_split(text, 40_000, "chars")
    assert len(parts) == 2


# --- specific behaviours ---------------------------------------------------------------------------

def test_short_text_is_one_unchanged_part() -> None:
    assert split_message("Hello **world**\n\n- a\n- b", 4096, "utf16") == ["Hello **world**\n\n- a\n- b"]


def test_whitespace_only_text_gives_no_parts() -> None:
    assert split_message(" \n\n \t\n", 100) == []
    assert split_message("", 100) == []


def test_prefers_a_paragraph_boundary_over_a_line_boundary() -> None:
    first = "First paragraph line one.\nline two of the first paragraph."
    second = "Second paragraph, which is long enough that both do not fit together."
    parts = split_message(f"{first}\n\n{second}", len(first) + 20)
    assert parts == [first, second]


def test_splits_a_long_paragraph_at_sentence_boundaries() -> None:
    text = " ".join(f"Sentence number {i} ends here." for i in range(40))
    parts = assert_valid_split(text, 200, "chars")
    assert all(part.endswith(".") for part in parts)


def test_splits_at_words_when_a_sentence_is_longer_than_the_limit() -> None:
    text = " ".join(["word"] * 200)
    parts = assert_valid_split(text, 50, "chars")
    assert all(part.split(" ") == ["word"] * len(part.split(" ")) for part in parts)


def test_hard_splits_only_a_word_longer_than_the_limit() -> None:
    text = "short words " + "A" * 250 + " tail"
    parts = assert_valid_split(text, 100, "chars")
    assert parts == ["short words", "A" * 100, "A" * 100, "A" * 50 + " tail"]


def test_emoji_count_two_utf16_units_and_are_never_cut_in_half() -> None:
    text = "😀" * 100  # 200 UTF-16 units, 100 characters
    parts = assert_valid_split(text, 50, "utf16")
    assert [len(p) for p in parts] == [25, 25, 25, 25]
    assert split_message(text, 100, "chars") == [text]


def test_does_not_cut_inside_a_zwj_emoji_sequence_or_flag() -> None:
    family = "👨\u200d👩\u200d👧"
    text = (family + "🇩🇪") * 40
    for limit in (17, 23, 31):
        parts = assert_valid_split(text, limit, "utf16")
        for part in parts:
            assert not part.startswith("\u200d") and not part.endswith("\u200d")
            assert part.count("🇩🇪") * 2 == sum(1 for c in part if 0x1F1E6 <= ord(c) <= 0x1F1FF)


def test_a_cut_code_block_is_closed_and_reopened_with_its_info_string() -> None:
    code = "\n".join(f"x_{i} = {i}" for i in range(100))
    text = f"Intro.\n\n```python\n{code}\n```\n\nOutro."
    parts = assert_valid_split(text, 300, "chars")
    assert len(parts) > 3
    for part in parts[1:-1]:
        assert part.startswith("```python\n") and part.endswith("\n```")
    assert parts[0].startswith("Intro.")
    assert parts[-1].endswith("```\n\nOutro.") or parts[-1] == "Outro."


def test_a_code_block_that_fits_a_message_starts_a_new_part_instead_of_being_cut() -> None:
    prose = " ".join(["prose"] * 60)  # 359 chars
    code = "```js\n" + "\n".join(f"let v{i} = {i};" for i in range(20)) + "\n```"  # ~280 chars
    parts = assert_valid_split(f"{prose}\n\n{code}", 450, "chars")
    assert parts == [prose, code]


def test_tilde_and_long_backtick_fences_are_reopened_with_the_same_fence() -> None:
    for fence in ("~~~", "````"):
        text = f"{fence}sh\n" + "\n".join(f"echo {i}" for i in range(60)) + f"\n{fence}"
        parts = assert_valid_split(text, 120, "chars")
        assert all(p.startswith(f"{fence}sh\n") and p.endswith(f"\n{fence}") for p in parts)


def test_indentation_inside_code_is_preserved_across_a_cut() -> None:
    body = "\n".join("        deeply_indented_line()" for _ in range(30))
    parts = split_message(f"```python\n{body}\n```", 200)
    for part in parts:
        for line in part.split("\n")[1:-1]:
            assert line == "        deeply_indented_line()"


def test_an_unclosed_fence_is_closed_in_the_last_part() -> None:
    assert split_message("Look:\n```python\nprint(1)", 100) == ["Look:\n```python\nprint(1)\n```"]
    parts = assert_valid_split("Look:\n```python\n" + "print(1)\n" * 50, 100, "chars")
    assert parts[-1].endswith("\n```")


def test_a_mid_line_fence_marker_never_starts_a_part() -> None:
    text = ("word " * 15 + "``` not a fence ~~~ either ") * 10
    parts = assert_valid_split(text, 60, "chars")
    assert not any(p.startswith(("```", "~~~")) for p in parts)


def test_rejects_a_nonsense_limit_or_unit() -> None:
    with pytest.raises(ValueError):
        split_message("x", 0)
    with pytest.raises(ValueError):
        split_message("x", 10, "bytes")  # type: ignore[arg-type]
