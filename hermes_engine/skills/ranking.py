"""Lexical hint ranking: BM25F over a skill's fields, on Snowball stems.

A person rarely uses a skill's own words ("turn my 15 commits into a single one" for a skill about
squashing commits), so matching works on stems (`squashing` = `squash`), and each field of a skill counts
for what it says about when the skill applies: its description and "When to use" most, then the example
requests it serves (front matter `triggers`), its name and tags; the steps and pitfalls a little. Scores are
BM25F: term frequencies are length-normalised per field, weighted, summed, then saturated once per term,
so a word repeated across fields does not count several times over.
"""

from __future__ import annotations

import math
import re
from collections import Counter
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

import Stemmer

from hermes_engine.skills.model import Skill, section

_STOPWORD_TEXT = """
a about above after again against all also am an and any are aren as at be because been before being below
between both but by can cannot could couldn did didn do does doesn doing don down during each else ever every
few for from further get gets getting got had hadn has hasn have haven having he her here hers herself him
himself his how i if in into is isn it its itself just let lets like ll me might mine more most much must my
myself need needs no nor not now of off on once only or other ought our ours ourselves out over own please
pls plz re really same shall she should shouldn so some such than that the their theirs them themselves then
there these they this those through to too under until up us ve very was wasn way we were weren what when
where which while who whom why will with won would wouldn you your yours yourself yourselves hi hey hello
thanks thank thx ok okay yes yeah sure help want wanna gonna trying try tried know tell show anyone someone
something anything thing things stuff bit quick quickly maybe still best good great nice cool lol hmm guys
today right one ones use using used make makes made go going able two three four five six seven eight nine
ten first second last new yet s t d m im ive id dont cant wont isnt doesnt didnt whats thats theres
"""
STOPWORDS = frozenset(_STOPWORD_TEXT.split())

_WORD = re.compile(r"[^\W_]+", re.UNICODE)
# PyStemmer keeps its own cache of recent words; a small one serves the skill index and the short messages
# ranked against it, and stays small however many distinct words (names, ids) people write.
_STEMMER = Stemmer.Stemmer("english", 2048)


def stem(word: str) -> str:
    return str(_STEMMER.stemWord(word))


def tokens(text: str) -> list[str]:
    """Stems of the content words of `text`, in order (stopwords, single letters and numbers dropped)."""
    out = []
    for w in _WORD.findall(text.lower()):
        if len(w) < 2 or w in STOPWORDS or w.isdigit():
            continue
        out.append(stem(w))
    return out


def query_terms(text: str, limit: int = 32) -> list[str]:
    """Distinct stems of a message, in order."""
    return list(dict.fromkeys(tokens(text)))[:limit]


@dataclass(frozen=True)
class Field:
    name: str
    weight: float
    b: float = 0.75  # length normalisation: short fields (names, tags) barely need it


# What a field says about when a skill applies decides its weight.
FIELDS: tuple[Field, ...] = (
    Field("description", 3.0),
    Field("when", 3.0),
    Field("triggers", 2.0),
    Field("name", 2.0, b=0.3),
    Field("tags", 1.5, b=0.3),
    Field("category", 0.5, b=0.0),
    Field("body", 0.3),
)


def skill_fields(skill: Skill, *, with_triggers: bool = True) -> dict[str, str]:
    """The text of each indexed field of `skill`."""
    body = "\n".join(section(skill.body, title) for title in ("Steps", "Pitfalls"))
    return {
        "description": skill.description,
        "when": skill.when_to_use,
        "triggers": "\n".join(skill.triggers) if with_triggers else "",
        "name": skill.name.replace("-", " "),
        "tags": " ".join(skill.tags),
        "category": skill.category.replace("-", " "),
        "body": body,
    }


@dataclass(frozen=True)
class Hit:
    name: str
    score: float  # BM25F: higher is better
    matched: tuple[str, ...]  # query stems this skill contains (any field)
    rare: tuple[str, ...] = ()  # matched stems few skills share, found in the skill's own summary fields

    @property
    def relevant(self) -> bool:
        """Two or more stems of the message match, or one rare stem from the skill's summary."""
        return len(self.matched) >= 2 or bool(self.rare)


SUMMARY_FIELDS = ("name", "tags", "description", "triggers")


class LexicalRanker:
    """BM25F over an in-memory index of skills; `rebuild` whenever the library changes."""

    K1 = 1.2
    RARE_DF = 3  # a single matching stem counts when at most this many skills contain it

    def __init__(self, skills: Iterable[Skill] = (), *, with_triggers: bool = True) -> None:
        self.with_triggers = with_triggers
        self._names: list[str] = []
        self._tf: list[dict[str, Counter[str]]] = []  # per skill, per field
        self._len: list[dict[str, int]] = []
        self._avg: dict[str, float] = {}
        self._df: Counter[str] = Counter()
        self.rebuild(skills)

    def rebuild(self, skills: Iterable[Skill]) -> None:
        self._names, self._tf, self._len, self._df = [], [], [], Counter()
        for s in sorted(skills, key=lambda s: s.name):
            fields = {f: Counter(tokens(text)) for f, text in skill_fields(s, with_triggers=self.with_triggers).items()}
            self._names.append(s.name)
            self._tf.append(fields)
            self._len.append({f: sum(c.values()) for f, c in fields.items()})
            self._df.update(set().union(*(c.keys() for c in fields.values())))
        n = max(1, len(self._names))
        self._avg = {f.name: max(1.0, sum(lens[f.name] for lens in self._len) / n) for f in FIELDS}

    def __len__(self) -> int:
        return len(self._names)

    def idf(self, term: str) -> float:
        n, df = len(self._names), self._df.get(term, 0)
        return math.log(1 + (n - df + 0.5) / (df + 0.5))

    def rank(self, text: str, limit: int = 0) -> list[Hit]:
        """Every skill matching a stem of `text`, best first (ties by name); no relevance cut."""
        terms = [t for t in query_terms(text) if t in self._df]
        if not terms:
            return []
        hits = []
        for i, fields in enumerate(self._tf):
            score = 0.0
            matched, rare = [], []
            for t in terms:
                weighted = 0.0
                for f in FIELDS:
                    tf = fields[f.name].get(t, 0)
                    if tf:
                        norm = 1 - f.b + f.b * self._len[i][f.name] / self._avg[f.name]
                        weighted += f.weight * tf / norm
                if weighted:
                    score += self.idf(t) * weighted / (self.K1 + weighted)
                    matched.append(t)
                    if self._df[t] <= self.RARE_DF and any(fields[f].get(t) for f in SUMMARY_FIELDS):
                        rare.append(t)
            if score:
                hits.append(Hit(self._names[i], score, tuple(matched), tuple(rare)))
        hits.sort(key=lambda h: (-h.score, h.name))
        return hits[:limit] if limit else hits


def select_hints(ranked: Sequence[Hit], limit: int = 3, min_ratio: float = 0.6) -> list[Hit]:
    """At most `limit` relevant hits; the ones after the first must score `min_ratio` of the first."""
    relevant = [h for h in ranked if h.relevant]
    if not relevant:
        return []
    top = relevant[0].score
    return [h for i, h in enumerate(relevant) if i == 0 or h.score >= min_ratio * top][:limit]


__all__ = ["FIELDS", "Field", "Hit", "LexicalRanker", "query_terms", "select_hints", "skill_fields", "stem",
           "tokens"]
