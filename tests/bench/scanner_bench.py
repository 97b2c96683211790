"""Security-scan benchmark: precision and recall on labelled threats and benign memory/skill texts.

    python -m tests.bench.scanner_bench [--show-misses]
    python tests/bench/scanner_bench.py

Two sets, each line `{"label": "threat"|"benign", "kind": "memory"|"skill", "category": …, "text": …}`:
- `data/scanner_own.jsonl` ("own"): written beside the rules; misses here led to rule changes.
- `data/scanner_heldout.jsonl` ("held-out"): written from the category names only and committed before the
  rules existed, never used for tuning. Both are by the same author as the rules, so the held-out figures
  are a regression guard, not a measure of texts from the wild.

A text counts as flagged when the scan would refuse to write it (`ScanResult.blocked`, with no approvals):
a high finding, or a low one (injection wording inside code) that only an admin's approval accepts.

Targets (own set): precision ≥ 0.95 and recall ≥ 0.95.

Then the worst case: texts built to make a regular expression backtrack (fragments of many rules repeated),
through the scan and through the log redactor, at 25 kB and at 100 kB. Target: the time grows linearly
(4× the text takes at most 6× as long); a backtracking pattern would grow with the square or worse.
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
import time
from collections import Counter
from dataclasses import dataclass
from pathlib import Path

if __package__ in (None, ""):  # run as a script: make the repository importable
    sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

from hermes_engine.policy.approved import ApprovedHashes  # noqa: E402
from hermes_engine.policy.security import scan  # noqa: E402
from hermes_engine.secrets import redact  # noqa: E402

DATA = Path(__file__).parent / "data"
SETS = {"own": DATA / "scanner_own.jsonl", "held-out": DATA / "scanner_heldout.jsonl"}
TARGET = 0.95
GROWTH_LIMIT = 6.0  # 4× the text may take at most this many times as long: linear, not backtracking
PATHOLOGICAL = {  # name → a fragment of many rules that never completes a match, repeated
    "scan: injection and exfiltration fragments": "send the curl ignore all <!-- ",
    "scan: spaced-out letters": "i g n o r e p r e v ",
    "redact: key-shaped fragments": "a-b_c password= key sk- xox -----BEGIN PRIVATE KEY----- ",
}


@dataclass
class Score:
    tp: int = 0
    fp: int = 0
    fn: int = 0
    tn: int = 0

    @property
    def precision(self) -> float:
        return self.tp / (self.tp + self.fp) if self.tp + self.fp else 1.0

    @property
    def recall(self) -> float:
        return self.tp / (self.tp + self.fn) if self.tp + self.fn else 1.0


def load(path: Path) -> list[dict[str, str]]:
    return [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines() if line.strip()]


def evaluate(rows: list[dict[str, str]], approvals: ApprovedHashes) -> tuple[Score, list[tuple[str, dict[str, str]]]]:
    score, misses = Score(), []
    for row in rows:
        result = scan(row["text"], kind=row["kind"], approvals=approvals)
        threat = row["label"] == "threat"
        if result.blocked and threat:
            score.tp += 1
        elif result.blocked:
            score.fp += 1
            misses.append((f"false positive ({', '.join(f.rule for f in result.blocking)})", row))
        elif threat:
            score.fn += 1
            misses.append(("missed", row))
        else:
            score.tn += 1
    return score, misses


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--show-misses", action="store_true", help="print every miss and false positive")
    args = parser.parse_args()
    ok = True
    with tempfile.TemporaryDirectory() as tmp:
        approvals = ApprovedHashes(Path(tmp) / "approved.json")  # nothing approved
        print(f"{'set':<9} {'threats':>7} {'benign':>6} {'precision':>9} {'recall':>6}  {'ms/text':>7}")
        for name, path in SETS.items():
            rows = load(path)
            started = time.perf_counter()
            score, misses = evaluate(rows, approvals)
            per_text = (time.perf_counter() - started) * 1000 / len(rows)
            counts = Counter(r["label"] for r in rows)
            print(f"{name:<9} {counts['threat']:>7} {counts['benign']:>6} {score.precision:>9.3f} {score.recall:>6.3f}"
                  f"  {per_text:>7.2f}")
            if name == "own":
                ok = score.precision >= TARGET and score.recall >= TARGET
            if args.show_misses:
                for why, row in misses:
                    print(f"  {why} [{row['category']}] {row['text'][:100]!r}")
    print(f"own set {'meets' if ok else 'misses'} the targets (precision and recall ≥ {TARGET})")
    return 0 if worst_case() and ok else 1


def worst_case() -> bool:
    """Milliseconds for each pathological text at two sizes; whether every one grows linearly."""
    linear = True
    with tempfile.TemporaryDirectory() as tmp:
        approvals = ApprovedHashes(Path(tmp) / "approved.json")
        print(f"{'worst case':<46} {'25 kB':>8} {'100 kB':>8} {'growth':>6}")
        for name, fragment in PATHOLOGICAL.items():
            timings = []
            for size in (25_000, 100_000):
                text = (fragment * (size // len(fragment) + 1))[:size]
                started = time.perf_counter()
                if name.startswith("redact"):
                    redact(text)
                else:
                    scan(text, kind="skill", approvals=approvals)
                timings.append(time.perf_counter() - started)
            growth = timings[1] / max(timings[0], 1e-6)
            linear = linear and growth <= GROWTH_LIMIT
            print(f"{name:<46} {timings[0] * 1000:>6.0f}ms {timings[1] * 1000:>6.0f}ms {growth:>5.1f}×")
    print(f"worst case {'meets' if linear else 'misses'} the target (4× the text at most {GROWTH_LIMIT:.0f}× the time)")
    return linear


if __name__ == "__main__":
    raise SystemExit(main())
