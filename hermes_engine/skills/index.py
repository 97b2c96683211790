"""Progressive disclosure: a compact, stable index for the system prompt, and per-message hints.

The index lists every category and as many skill names (and short descriptions) as a token budget allows;
it holds nothing that changes from use to use, so the cached prompt prefix survives. Hints rank skills
for one user message (BM25F on stems, `ranking.py`; fused with embeddings when configured, `hints.py`) and
name at most three, or none when nothing matches well enough.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from hermes_engine.ports.conversation import estimate_tokens
from hermes_engine.skills.model import Skill
from hermes_engine.skills.ranking import Hit, LexicalRanker, query_terms, select_hints

INDEX_HEADER = ("# Skills\nSaved procedures from past work. Before a task that matches one, load it with "
                "skill_view(name); skills_list(category) lists a category. After solving something tricky, "
                "save the procedure with skill_manage.")
EMPTY_INDEX = ("# Skills\nNo saved skills yet. After solving a tricky, repeatable task, save the procedure "
               "with skill_manage(action=\"create\").")
DESC_CHARS = 60


def token_budget(n_skills: int) -> int:
    """Index size target in tokens (chars/4): grows slowly with the library, capped at 800."""
    return min(800, 130 + 10 * n_skills)


def short_description(text: str, limit: int = DESC_CHARS) -> str:
    """First clause of a description, cut on a word boundary."""
    text = " ".join(text.split())
    first = re.split(r"(?<=[.!?])\s|\s[—–]\s|;\s|\.\s*Use when\b", text, maxsplit=1)[0].rstrip(".")
    if len(first) <= limit:
        return first
    cut = first[: limit - 1].rsplit(" ", 1)[0].rstrip(",;:-")
    return cut + "…"


@dataclass(frozen=True)
class _Entry:
    name: str
    category: str
    description: str
    user: bool


def render_index(skills: Sequence[Skill], max_tokens: int | None = None) -> str:
    """A compact, deterministic listing of `skills` that fits `max_tokens` (default: `token_budget`).

    Order of compression: every name with a short description → names only for the rest (descriptions
    go first to hand-written skills, then round-robin over categories) → names round-robin over categories
    with "+N more" (every category is always listed, so `skills_list(category)` can find the rest).
    """
    if not skills:
        return EMPTY_INDEX
    budget_chars = 4 * (max_tokens if max_tokens is not None else token_budget(len(skills)))
    by_cat: dict[str, list[_Entry]] = {}
    for s in sorted(skills, key=lambda s: (s.category, s.name)):
        by_cat.setdefault(s.category, []).append(
            _Entry(s.name, s.category, short_description(s.description), s.created_by == "user"))
    # priority: round-robin over categories; within a category hand-written skills first, then by name
    queues = {c: sorted(v, key=lambda e: (not e.user, e.name)) for c, v in by_cat.items()}
    order: list[_Entry] = []
    depth = 0
    while len(order) < len(skills):
        for c in sorted(queues):
            if depth < len(queues[c]):
                order.append(queues[c][depth])
        depth += 1

    def build(shown: set[str], described: set[str]) -> str:
        lines = [INDEX_HEADER]
        for c in sorted(by_cat):
            parts = []
            for e in by_cat[c]:
                if e.name in shown:
                    parts.append(f"{e.name} ({e.description})" if e.name in described and e.description else e.name)
            hidden = len(by_cat[c]) - len(parts)
            if hidden:
                parts.append(f"+{hidden} more" if parts else f"{hidden} skills")
            lines.append(f"- {c}: " + ", ".join(parts))
        return "\n".join(lines)

    def fits(text: str) -> bool:
        return estimate_tokens(text) * 4 <= budget_chars

    shown: set[str] = set()
    described: set[str] = set()
    all_names = {e.name for e in order}
    if fits(build(all_names, set())):
        shown = set(all_names)
        for e in order:  # add descriptions while they fit
            described.add(e.name)
            if not fits(build(shown, described)):
                described.discard(e.name)
        return build(shown, described)
    for e in order:  # names only, round-robin, while they fit
        shown.add(e.name)
        if not fits(build(shown, described)):
            shown.discard(e.name)
            break
    return build(shown, described)


# ---------------------------------------------------------------------------------------------- hints

class HintRanker(LexicalRanker):
    """The lexical ranker with the hint cut: what a turn shows when no embedding model is configured."""

    def hints(self, text: str, limit: int = 3, min_ratio: float = 0.6) -> list[Hit]:
        """At most `limit` relevant skills for a message; [] when nothing is relevant enough (see
        `ranking.select_hints`)."""
        return select_hints(self.rank(text), limit, min_ratio)


def hint_text(hits: Sequence[Hit], tools: Mapping[str, Sequence[str]] | None = None) -> str | None:
    """The hint line; a skill that names its tools says which (a few tokens that help the model pick)."""
    if not hits:
        return None
    tools = tools or {}
    names = ", ".join(f"{h.name} (uses {', '.join(tools[h.name])})" if tools.get(h.name) else h.name
                      for h in hits)
    return f"(Skills that may fit this request: {names}. Load one with skill_view before starting.)"


__all__ = ["EMPTY_INDEX", "HintRanker", "Hit", "hint_text", "query_terms", "render_index", "short_description",
           "token_budget"]
