"""Progressive disclosure: a compact, stable index for the system prompt, and per-message hints.

The index lists every category and as many skill names (and short descriptions) as a token budget allows;
it holds nothing that changes from use to use, so the cached prompt prefix survives. Hints rank skills
for one user message with SQLite FTS5 (bm25 with column weights over name, description, tags and
"When to use") and name at most three, or none when nothing matches well enough.
"""

from __future__ import annotations

import re
import sqlite3
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

from hermes_engine.ports.conversation import estimate_tokens
from hermes_engine.skills.model import Skill

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

STOPWORDS = frozenset([
    "a", "about", "above", "after", "again", "against", "all", "also", "am", "an", "and", "any", "are", "aren",
    "as", "at", "be", "because", "been", "before", "being", "below", "between", "both", "but", "by", "can",
    "cannot", "could", "couldn", "did", "didn", "do", "does", "doesn", "doing", "don", "down", "during", "each",
    "else", "ever", "every", "few", "for", "from", "further", "get", "gets", "getting", "got", "had", "hadn",
    "has", "hasn", "have", "haven", "having", "he", "her", "here", "hers", "herself", "him", "himself", "his",
    "how", "i", "if", "in", "into", "is", "isn", "it", "its", "itself", "just", "let", "lets", "like", "ll",
    "me", "might", "mine", "more", "most", "much", "must", "my", "myself", "need", "needs", "no", "nor", "not",
    "now", "of", "off", "on", "once", "only", "or", "other", "ought", "our", "ours", "ourselves", "out", "over",
    "own", "please", "pls", "plz", "re", "really", "same", "shall", "she", "should", "shouldn", "so", "some",
    "such", "than", "that", "the", "their", "theirs", "them", "themselves", "then", "there", "these", "they",
    "this", "those", "through", "to", "too", "under", "until", "up", "us", "ve", "very", "was", "wasn", "way",
    "we", "were", "weren", "what", "when", "where", "which", "while", "who", "whom", "why", "will", "with",
    "won", "would", "wouldn", "you", "your", "yours", "yourself", "yourselves", "hi", "hey", "hello", "thanks",
    "thank", "thx", "ok", "okay", "yes", "yeah", "sure", "help", "want", "wanna", "gonna", "trying", "try",
    "tried", "know", "tell", "show", "anyone", "someone", "something", "anything", "thing", "things", "stuff",
    "bit", "quick", "quickly", "maybe", "also", "still", "again", "best", "good", "great", "nice", "cool",
    "lol", "hmm", "guys", "today", "now", "right", "one", "ones", "use", "using", "used", "make", "makes",
    "made", "go", "going", "able", "two", "three", "four", "five", "six", "seven", "eight", "nine", "ten",
    "first", "second", "last", "new", "yet"
])

_WORD = re.compile(r"[^\W_]+", re.UNICODE)


def query_terms(text: str, limit: int = 24) -> list[str]:
    """Content words of a message, lowercased, deduplicated, in order."""
    seen: dict[str, None] = {}
    for w in _WORD.findall(text.lower()):
        if len(w) < 2 or w in STOPWORDS or w.isdigit():
            continue
        seen.setdefault(w, None)
        if len(seen) >= limit:
            break
    return list(seen)


@dataclass(frozen=True)
class Hit:
    name: str
    score: float  # bm25, negated: higher is better
    matched: tuple[str, ...]  # query terms this skill matched (any column)
    topical: tuple[str, ...]  # the subset matched in its name or tags
    rare: tuple[str, ...] = ()  # topical terms that few skills share

    @property
    def relevant(self) -> bool:
        """Two or more words of the message match, or one word that names the skill's topic and is rare."""
        return len(self.matched) >= 2 or bool(self.rare)


class HintRanker:
    """An in-memory FTS5 index of skills; rebuilt whenever the library changes."""

    # bm25 column weights: name, description, tags, when_to_use, category
    WEIGHTS = (6.0, 3.0, 4.0, 1.5, 1.0)
    RARE_DF = 3  # a single matching word counts when at most this many skills contain it

    def __init__(self, skills: Iterable[Skill] = ()) -> None:
        self._db = sqlite3.connect(":memory:", check_same_thread=False)
        self._db.execute(
            "CREATE VIRTUAL TABLE skills USING fts5(name, description, tags, when_to_use, category, "
            "tokenize='porter unicode61 remove_diacritics 2')")
        self._names: dict[int, str] = {}
        self.rebuild(skills)

    def rebuild(self, skills: Iterable[Skill]) -> None:
        with self._db:
            self._db.execute("DELETE FROM skills")
            self._names.clear()
            for i, s in enumerate(sorted(skills, key=lambda s: s.name), start=1):
                self._db.execute(
                    "INSERT INTO skills(rowid, name, description, tags, when_to_use, category) VALUES (?,?,?,?,?,?)",
                    (i, s.name.replace("-", " "), s.description, " ".join(s.tags), s.when_to_use, s.category))
                self._names[i] = s.name

    def __len__(self) -> int:
        return len(self._names)

    @staticmethod
    def _quote(term: str) -> str:
        return '"' + term.replace('"', '""') + '"'

    def _rowids(self, expr: str, within: Sequence[int] | None = None) -> set[int]:
        sql = "SELECT rowid FROM skills WHERE skills MATCH ?"
        args: list[str | int] = [expr]
        if within is not None:
            sql += f" AND rowid IN ({','.join('?' * len(within))})"
            args += list(within)
        try:
            return {r[0] for r in self._db.execute(sql, args).fetchall()}
        except sqlite3.OperationalError:
            return set()

    def rank(self, text: str, limit: int = 3, candidates: int = 10) -> list[Hit]:
        """Best bm25 matches for `text`, best first, with what each matched (no relevance cut; see `hints`)."""
        terms = query_terms(text)
        if not terms or not self._names:
            return []
        expr = " OR ".join(self._quote(t) for t in terms)
        weights = ", ".join(str(w) for w in self.WEIGHTS)
        try:
            rows = self._db.execute(
                f"SELECT rowid, bm25(skills, {weights}) AS score FROM skills WHERE skills MATCH ? "
                f"ORDER BY score, rowid LIMIT ?", (expr, candidates)).fetchall()
        except sqlite3.OperationalError:
            return []
        if not rows:
            return []
        rowids = [r[0] for r in rows]
        matched: dict[int, list[str]] = {r: [] for r in rowids}
        topical: dict[int, list[str]] = {r: [] for r in rowids}
        rare: dict[int, list[str]] = {r: [] for r in rowids}
        for t in terms:
            everywhere = self._rowids(self._quote(t))
            for r in everywhere.intersection(rowids):
                matched[r].append(t)
            for r in self._rowids("{name tags} : " + self._quote(t), rowids):
                topical[r].append(t)
                if len(everywhere) <= self.RARE_DF:
                    rare[r].append(t)
        hits = [Hit(self._names[r], -score, tuple(matched[r]), tuple(topical[r]), tuple(rare[r])) for r, score in rows]
        return hits[:limit] if limit else hits

    def hints(self, text: str, limit: int = 3, min_ratio: float = 0.5) -> list[Hit]:
        """At most `limit` relevant skills for a message; [] when nothing is relevant enough.

        Relevant (`Hit.relevant`): two or more content words of the message match the skill, or a single
        word matches its name or tags and at most `RARE_DF` skills contain it. Hits after the first must
        score at least `min_ratio` of the first.
        """
        relevant = [h for h in self.rank(text, limit=0) if h.relevant]
        if not relevant:
            return []
        top = relevant[0].score
        return [h for i, h in enumerate(relevant) if i == 0 or h.score >= min_ratio * top][:limit]


def hint_text(hits: Sequence[Hit]) -> str | None:
    if not hits:
        return None
    names = ", ".join(h.name for h in hits)
    return f"(Skills that may fit this request: {names}. Load one with skill_view before starting.)"


__all__ = ["EMPTY_INDEX", "HintRanker", "Hit", "hint_text", "query_terms", "render_index", "short_description",
           "token_budget"]
