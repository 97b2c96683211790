"""The learning-curve environment: task families that share a procedure, and the knowledge-base tool.

The families are data (`families.json`). Every family is a repeated chore (deploy a service, set up a new hire, reconcile a month): each task names
a different subject, and all of them are solved by the same few lookups. Without a skill, the work starts by
finding out where things are (orientation lookups) before the lookups that matter; a saved procedure
names the lookups that matter. Everything here is a pure function of its input, so every run is the same.
"""

from __future__ import annotations

import json
import re
import zlib
from dataclasses import dataclass
from pathlib import Path

from hermes_engine.ports.tools import Tool
from hermes_engine.tools.registry import tool


@dataclass(frozen=True)
class Family:
    """Tasks sharing one procedure. `{s}` in a key or sentence stands for the task's subject."""

    name: str
    task: str  # the person's request
    pattern: str  # how the model recognises a task of this family (one group: the subject)
    subjects: tuple[str, ...]
    orientation: tuple[str, ...]  # lookups that only find out where things are
    procedure: tuple[str, ...]  # lookups that do the work
    placeholder: str  # how a saved skill names the subject in its steps
    marker: str  # words the family's skill says in "When to use" (how the model judges a loaded skill)
    skill_name: str
    category: str
    description: str
    tags: tuple[str, ...]
    answer: str

    def tasks(self) -> list[str]:
        return [self.task.format(s=s) for s in self.subjects]

    def subject_of(self, text: str) -> str | None:
        m = re.search(self.pattern, text)
        return m.group(1) if m else None

    def exploration(self, subject: str) -> list[str]:
        return [k.format(s=subject) for k in (*self.orientation, *self.procedure)]

    def skill_md(self) -> str:
        """The SKILL.md a reviewer writes after exploring one task of this family."""
        steps = [f"lookup `{k.format(s=self.placeholder)}` and check the entry." for k in self.procedure]
        return (f"---\nname: {self.skill_name}\ndescription: {self.description}\nversion: 1.0.0\n"
                f"category: {self.category}\ntags: [{', '.join(self.tags)}]\n---\n\n"
                f"## When to use\nWhen asked to {self.marker} ({self.placeholder} varies).\n\n## Steps\n"
                + "\n".join(f"{i}. {s}" for i, s in enumerate(steps, start=1))
                + f"\n{len(steps) + 1}. Answer with what each lookup said.\n\n## Pitfalls\n"
                "- The orientation pages (handbooks, runbook lists) add nothing; go straight to the steps.\n")


FAMILIES_FILE = Path(__file__).with_name("families.json")


def load_families(path: Path = FAMILIES_FILE) -> tuple[Family, ...]:
    """The families, kept as data in `families.json` (lists there are tuples here)."""
    raw = json.loads(path.read_text(encoding="utf-8"))
    return tuple(Family(**{k: tuple(v) if isinstance(v, list) else v for k, v in f.items()}) for f in raw)


FAMILIES: tuple[Family, ...] = load_families()


def family_of(text: str) -> tuple[Family, str] | None:
    """The family and subject of a request, as a model would understand it."""
    for family in FAMILIES:
        subject = family.subject_of(text)
        if subject:
            return family, subject
    return None


def entry(key: str) -> str:
    """The knowledge base: one deterministic entry per key (a number stands for the entry's details)."""
    return f"{key}: entry #{zlib.crc32(key.encode()) % 10_000} found, nothing unusual."


@tool(toolset="test")
def lookup(key: str) -> str:
    """Read one entry of the team's knowledge base (runbooks, services, people, finance).

    Args:
      key: entry path, e.g. runbooks/deploy
    """
    return entry(key)


LOOKUP: Tool = lookup

__all__ = ["FAMILIES", "LOOKUP", "Family", "entry", "family_of"]
