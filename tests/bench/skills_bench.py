"""Skills benchmark: prompt-index size and hint accuracy on realistic libraries of 50 and 200 skills.

    python -m tests.bench.skills_bench [--show-misses]
    python tests/bench/skills_bench.py

The libraries are built in a temporary folder from `data/skill_catalog.jsonl` (200 skills over 20 domains:
git, docker, kubernetes, postgres, python, data/CSV, writing/email, travel, web, linux, networking, cloud,
CI, security, finance, productivity, home, ML/LLM, docs, mobile); the 50-skill library is every fourth
entry. Hints are scored on `data/skill_hint_cases.jsonl`: user messages labelled with the skill that fits
(`"skill": null` for small talk, where no hint should appear). Two splits: "dev" (written first; its misses
led to the "Typical requests" trigger line every catalog skill carries in "When to use") and "holdout"
(written after the catalog was frozen, never used for tuning). Both are by the same author as the catalog,
so treat the figures as a regression guard, not as a measure of real users.

Targets: index ≤ 630 tokens at 50 skills and ≤ 800 at 200 (tokens = chars/4); the right skill among the
hints for ≥ 95% of the labelled messages.
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
import time
from pathlib import Path

if __package__ in (None, ""):  # run as a script: make the repository importable
    sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

from hermes_engine.ports.conversation import estimate_tokens  # noqa: E402
from hermes_engine.skills.index import HintRanker, render_index  # noqa: E402
from hermes_engine.skills.library import FileSkillLibrary, SkillChange  # noqa: E402
from hermes_engine.skills.model import Skill, render  # noqa: E402

DATA = Path(__file__).parent / "data"
CATALOG = DATA / "skill_catalog.jsonl"
CASES = DATA / "skill_hint_cases.jsonl"
TARGETS = {50: 630, 200: 800}
ACCURACY_TARGET = 0.95


def load_jsonl(path: Path) -> list[dict]:
    return [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines() if line.strip()]


def skill_text(row: dict) -> str:
    meta = {"name": row["name"], "description": row["description"], "version": "1.0.0",
            "category": row["category"], "tags": row["tags"]}
    steps = "\n".join(f"{i}. {s}" for i, s in enumerate(row["steps"], start=1))
    pitfalls = "\n".join(f"- {p}" for p in row["pitfalls"])
    when = f"- {row['when']}" + (f"\n- Typical requests: {row['triggers']}." if row.get("triggers") else "")
    return render(meta, f"## When to use\n{when}\n\n## Steps\n{steps}\n\n## Pitfalls\n{pitfalls}\n")


def build_library(root: Path, rows: list[dict]) -> FileSkillLibrary:
    """Write the skills through the library itself (validation + security scan), every 5th hand-written."""
    library = FileSkillLibrary(root)
    for i, row in enumerate(rows):
        library.apply_sync(SkillChange("create", row["name"], content=skill_text(row), category=row["category"]),
                           author="user" if i % 5 == 0 else "agent")
    return library


def subset_50(rows: list[dict]) -> list[dict]:
    return rows[::4]


def evaluate(ranker: HintRanker, cases: list[dict], names: set[str]) -> dict:
    positives = [c for c in cases if c["skill"] in names]
    negatives = [c for c in cases if c["skill"] is None]
    hit = top1 = shown = 0
    misses = []
    started = time.perf_counter()
    for case in positives:
        hints = [h.name for h in ranker.hints(case["message"])]
        shown += len(hints)
        if case["skill"] in hints:
            hit += 1
            top1 += hints[0] == case["skill"]
        else:
            misses.append((case["message"], case["skill"], hints))
    false_pos = []
    for case in negatives:
        hints = [h.name for h in ranker.hints(case["message"])]
        if hints:
            false_pos.append((case["message"], hints))
    elapsed = time.perf_counter() - started
    return {"cases": len(positives), "accuracy": hit / max(1, len(positives)), "top1": top1 / max(1, len(positives)),
            "avg_hints": shown / max(1, len(positives)), "negatives": len(negatives),
            "false_positive_rate": len(false_pos) / max(1, len(negatives)), "misses": misses,
            "false_positives": false_pos, "ms_per_query": 1000 * elapsed / max(1, len(positives) + len(negatives))}


def run(show_misses: bool = False) -> bool:
    rows = load_jsonl(CATALOG)
    cases = load_jsonl(CASES)
    ok = True
    print(f"catalog: {len(rows)} skills in {len({r['category'] for r in rows})} categories; "
          f"cases: {sum(1 for c in cases if c['skill'])} labelled + {sum(1 for c in cases if not c['skill'])} small talk")
    with tempfile.TemporaryDirectory(prefix="skills-bench-") as tmp:
        for size, chosen in ((50, subset_50(rows)), (200, rows)):
            started = time.perf_counter()
            library = build_library(Path(tmp) / f"lib{size}", chosen)
            skills: list[Skill] = library.list_sync()
            built = time.perf_counter() - started
            index = render_index(skills)
            tokens = estimate_tokens(index)
            shown = sum(1 for s in skills if s.name in index)
            started = time.perf_counter()
            ranker = HintRanker(skills)
            rebuild_ms = 1000 * (time.perf_counter() - started)
            names = {s.name for s in skills}
            index_ok = tokens <= TARGETS[size]
            print(f"\n== {size} skills (library built in {built:.2f}s, FTS index in {rebuild_ms:.1f} ms)")
            print(f"index: {tokens} tokens ({len(index)} chars), target ≤ {TARGETS[size]} "
                  f"[{'ok' if index_ok else 'MISSED'}]; {shown}/{len(skills)} names listed")
            ok = ok and index_ok
            for split in ("dev", "holdout", "all"):
                chosen_cases = [c for c in cases if split == "all" or c.get("split", "dev") == split]
                result = evaluate(ranker, chosen_cases, names)
                verdict = ""
                if split == "all":
                    acc_ok = result["accuracy"] >= ACCURACY_TARGET
                    ok = ok and acc_ok
                    verdict = f" (target ≥ {ACCURACY_TARGET:.0%}) [{'ok' if acc_ok else 'MISSED'}]"
                print(f"hints/{split:7s}: right skill among hints {result['accuracy']:.1%} of {result['cases']} "
                      f"messages{verdict}; top-1 {result['top1']:.1%}; {result['avg_hints']:.2f} hints/message; "
                      f"small talk with a hint {len(result['false_positives'])}/{result['negatives']}; "
                      f"{result['ms_per_query']:.2f} ms/message")
                if show_misses and split != "all":
                    for message, want, got in result["misses"]:
                        print(f"  miss: {message!r} → want {want}, got {got}")
                    for message, got in result["false_positives"]:
                        print(f"  false hint: {message!r} → {got}")
            if size == 200 and show_misses:
                print("\n" + index)
    print("\nall targets met" if ok else "\nsome targets MISSED")
    return ok


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--show-misses", action="store_true", help="list wrong hints and print the 200-skill index")
    args = parser.parse_args(argv)
    return 0 if run(args.show_misses) else 1


if __name__ == "__main__":
    raise SystemExit(main())
