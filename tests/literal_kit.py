"""The corpus of `data/literal_text.yaml`: lines a model writes and what a person reads of each.

A line's reading is written by hand. Without `reads` it is the line itself (nothing in it is Markdown
the model meant, so every character shows); `reads` is the reading everywhere the Markdown renders, and a
platform's key (`telegram`, `slack`, `discord`) overrides it where that platform shows it differently.
`gaps` names platforms that cannot show the line as written yet, and why (their tests are expected to
fail, and fail loudly once they pass). The console shows the Markdown as the model wrote it. Readings are compared without trailing whitespace,
which no chat shows.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

import yaml

PLATFORMS = ("telegram", "slack", "discord")


@dataclass(frozen=True)
class Line:
    text: str
    why: str
    reads: str | None = None
    per_platform: dict[str, str] = field(default_factory=dict)
    gaps: dict[str, str] = field(default_factory=dict)

    def reading(self, platform: str) -> str:
        """What a person reads of this line on `platform` ("console" too)."""
        if platform == "console":
            return self.text.rstrip()
        expected = self.per_platform.get(platform, self.reads if self.reads is not None else self.text)
        return expected.rstrip()

    def __str__(self) -> str:  # the test id
        return self.why


def _load() -> tuple[list[Line], str]:
    raw = yaml.safe_load((Path(__file__).parent / "data" / "literal_text.yaml").read_text(encoding="utf-8"))
    lines = [Line(entry["text"], entry["why"], entry.get("reads"), {p: entry[p] for p in PLATFORMS if p in entry},
                  entry.get("gaps", {})) for entry in raw["lines"]]
    return lines, raw["help"]


CORPUS, HELP = _load()
