"""Skills benchmark: prompt-index size and hint accuracy on realistic libraries of 50 and 200 skills.

    python -m tests.bench.skills_bench [--show-misses] [--no-triggers] [--embedder wordllama]
    python tests/bench/skills_bench.py --cases FILE [--skills DIR]

`--cases` takes any labelled set (JSON lines: {"message", "skills": [names]} or {"message", "skill": name|null},
optional "split"); `--skills` any folder of SKILL.md files (default: libraries built from the catalog).
Each run reports the lexical ranker with the skills' `triggers` indexed and without them (`--no-triggers`:
only without): the catalog's triggers were written after looking at the dev cases' misses, so the figure
without them is the honest lexical one. `--embedder wordllama` adds the same fused with WordLlama embeddings
(reciprocal rank fusion), a static model whose weights ship in its wheel.

The libraries are built in a temporary folder from `data/skill_catalog.jsonl` (200 skills over 20 domains:
git, docker, kubernetes, postgres, python, data/CSV, writing/email, travel, web, linux, networking, cloud,
CI, security, finance, productivity, home, ML/LLM, docs, mobile); the 50-skill library is every fourth
entry. Hints are scored on `data/skill_hint_cases.jsonl`: user messages labelled with the skill that fits
(`"skill": null` for small talk, where no hint should appear). Two splits: "dev" (written first; its misses
led to the `triggers` every catalog skill carries) and "holdout" (written after the catalog was frozen).
Both are by the same author as the catalog, so treat them as a regression guard;
`data/skill_hint_heldout_independent.jsonl` was written by someone else, over the same catalog.

Reported per split: recall@1/@3/@5 of the ranked list, how often the right skill is among the hints a turn
actually shows, the mean number of hints, and how often small talk gets a hint.

Targets: index ≤ 630 tokens at 50 skills and ≤ 800 at 200 (tokens = chars/4); recall@5 ≥ 85% on the
independent set with the lexical ranker alone.
"""

from __future__ import annotations

import argparse
import asyncio
import dataclasses
import json
import sys
import tempfile
import time
from pathlib import Path

if __package__ in (None, ""):  # run as a script: make the repository importable
    sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

from hermes_engine.ports.conversation import estimate_tokens  # noqa: E402
from hermes_engine.ports.embedding import Embedder  # noqa: E402
from hermes_engine.skills.hints import SkillHints  # noqa: E402
from hermes_engine.skills.index import render_index  # noqa: E402
from hermes_engine.skills.library import FileSkillLibrary, SkillChange  # noqa: E402
from hermes_engine.skills.model import MAX_TRIGGERS, Skill, SkillError, parse_skill, render  # noqa: E402

DATA = Path(__file__).parent / "data"
CATALOG = DATA / "skill_catalog.jsonl"
CASES = DATA / "skill_hint_cases.jsonl"
TARGETS = {50: 630, 200: 800}
RECALL_AT = (1, 3, 5)


def load_jsonl(path: Path) -> list[dict]:
    return [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines() if line.strip()]


def expected(case: dict) -> list[str]:
    """The labelled skill names of a case, in either format ([] = small talk, no hint wanted)."""
    if "skills" in case:
        return [str(n) for n in case["skills"] or []]
    return [case["skill"]] if case.get("skill") else []


def skill_text(row: dict, *, triggers: bool = True) -> str:
    meta = {"name": row["name"], "description": row["description"], "version": "1.0.0",
            "category": row["category"], "tags": row["tags"]}
    if triggers and row.get("triggers"):
        meta["triggers"] = [t.strip() for t in row["triggers"].split(",") if t.strip()][:MAX_TRIGGERS]
    steps = "\n".join(f"{i}. {s}" for i, s in enumerate(row["steps"], start=1))
    pitfalls = "\n".join(f"- {p}" for p in row["pitfalls"])
    return render(meta, f"## When to use\n- {row['when']}\n\n## Steps\n{steps}\n\n## Pitfalls\n{pitfalls}\n")


def build_library(root: Path, rows: list[dict], *, triggers: bool = True) -> FileSkillLibrary:
    """Write the skills through the library itself (validation + security scan), every 5th hand-written."""
    library = FileSkillLibrary(root)
    for i, row in enumerate(rows):
        library.apply_sync(SkillChange("create", row["name"], content=skill_text(row, triggers=triggers),
                                       category=row["category"]), author="user" if i % 5 == 0 else "agent")
    return library


def load_folder(root: Path) -> list[Skill]:
    """Every SKILL.md under `root` (any depth); unreadable ones are reported and skipped."""
    skills = []
    for path in sorted(root.rglob("SKILL.md")):
        try:
            skills.append(parse_skill(path.read_text(encoding="utf-8"), path=path.parent))
        except SkillError as exc:
            print(f"skipped {path}: {exc}", file=sys.stderr)
    return skills


def subset_50(rows: list[dict]) -> list[dict]:
    return rows[::4]


async def evaluate(ranker: SkillHints, cases: list[dict], names: set[str]) -> dict:
    positives = [c for c in cases if set(expected(c)) & names]
    negatives = [c for c in cases if not expected(c)]
    at = dict.fromkeys(RECALL_AT, 0)
    in_hints = first = shown = 0
    misses = []
    started = time.perf_counter()
    for case in positives:
        want = set(expected(case))
        ranked = [h.name for h in await ranker.rank(case["message"], limit=max(RECALL_AT))]
        for k in RECALL_AT:
            at[k] += bool(want & set(ranked[:k]))
        hints = [h.name for h in await ranker.hints(case["message"])]
        shown += len(hints)
        if want & set(hints):
            in_hints += 1
            first += hints[0] in want
        else:
            misses.append((case["message"], sorted(want), hints))
    false_pos = []
    for case in negatives:
        hints = [h.name for h in await ranker.hints(case["message"])]
        if hints:
            false_pos.append((case["message"], hints))
    elapsed = time.perf_counter() - started
    n = max(1, len(positives))
    return {"cases": len(positives), "recall": {k: v / n for k, v in at.items()}, "in_hints": in_hints / n,
            "first": first / n, "avg_hints": shown / n, "negatives": len(negatives),
            "skipped": len(cases) - len(positives) - len(negatives),
            "false_positive_rate": len(false_pos) / max(1, len(negatives)), "misses": misses,
            "false_positives": false_pos, "ms_per_query": 1000 * elapsed / max(1, len(positives) + len(negatives))}


async def report(label: str, ranker: SkillHints, cases: list[dict], names: set[str], show_misses: bool) -> None:
    print(f"-- {label}")
    splits = sorted({str(c.get("split", "all")) for c in cases})
    for split in splits + (["all"] if splits != ["all"] else []):
        chosen = [c for c in cases if split == "all" or str(c.get("split", "all")) == split]
        r = await evaluate(ranker, chosen, names)
        recall = " ".join(f"@{k} {v:.1%}" for k, v in r["recall"].items())
        print(f"hints/{split:9s}: {r['cases']} messages; recall {recall}; among the hints {r['in_hints']:.1%} "
              f"(first {r['first']:.1%}); {r['avg_hints']:.2f} hints/message; small talk with a hint "
              f"{len(r['false_positives'])}/{r['negatives']}"
              + (f"; {r['skipped']} cases name skills not in this library" if r["skipped"] else "")
              + f"; {r['ms_per_query']:.2f} ms/message")
        if show_misses and split != "all":
            for message, want, got in r["misses"]:
                print(f"  miss: {message!r} → want {want}, got {got}")
            for message, got in r["false_positives"]:
                print(f"  false hint: {message!r} → {got}")


def embedder_named(name: str) -> Embedder | None:
    if name == "none":
        return None
    from hermes_engine.providers.wordllama_embeddings import WordLlamaEmbedder

    return WordLlamaEmbedder()


async def report_variants(skills: list[Skill], cases: list[dict], *, triggers: bool, embedder: Embedder | None,
                          show_misses: bool) -> None:
    """Lexical with triggers (unless left out), lexical without, and the same fused with `embedder`."""
    names = {s.name for s in skills}
    for with_triggers in ((True, False) if triggers else (False,)):
        chosen = skills if with_triggers else [dataclasses.replace(s, triggers=()) for s in skills]
        for emb in (None, embedder) if embedder is not None else (None,):
            ranker = SkillHints(chosen, embedder=emb)
            label = (f"{'lexical' if emb is None else 'lexical + ' + emb.model + ' (RRF)'}, "
                     f"triggers {'indexed' if with_triggers else 'left out'}")
            await report(label, ranker, cases, names, show_misses)


def index_line(skills: list[Skill], size: int | None) -> bool:
    index = render_index(skills)
    tokens = estimate_tokens(index)
    target = TARGETS.get(size or 0)
    verdict = f", target ≤ {target} [{'ok' if tokens <= target else 'MISSED'}]" if target else ""
    print(f"index: {tokens} tokens ({len(index)} chars){verdict}; "
          f"{sum(1 for s in skills if s.name in index)}/{len(skills)} names listed")
    return target is None or tokens <= target


def run(cases_path: Path = CASES, skills_dir: Path | None = None, *, triggers: bool = True,
        embedder: Embedder | None = None, show_misses: bool = False) -> bool:
    cases = load_jsonl(cases_path)
    print(f"cases: {cases_path.name}: {sum(1 for c in cases if expected(c))} labelled + "
          f"{sum(1 for c in cases if not expected(c))} small talk")
    options = {"triggers": triggers, "embedder": embedder, "show_misses": show_misses}
    if skills_dir is not None:
        skills = load_folder(skills_dir)
        print(f"\n== {len(skills)} skills from {skills_dir}")
        ok = index_line(skills, None)
        asyncio.run(report_variants(skills, cases, **options))
        return ok
    ok = True
    rows = load_jsonl(CATALOG)
    with tempfile.TemporaryDirectory(prefix="skills-bench-") as tmp:
        for size, chosen in ((50, subset_50(rows)), (200, rows)):
            library = build_library(Path(tmp) / f"lib{size}", chosen, triggers=triggers)
            skills: list[Skill] = library.list_sync()
            print(f"\n== {size} skills (catalog)")
            ok = index_line(skills, size) and ok
            asyncio.run(report_variants(skills, cases, **options))
    print("\nindex targets met" if ok else "\nsome index targets MISSED")
    return ok


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=(__doc__ or "").split("\n\n")[0])
    parser.add_argument("--cases", type=Path, default=CASES, help="labelled messages (JSON lines)")
    parser.add_argument("--skills", type=Path, help="a folder of SKILL.md files (default: the catalog)")
    parser.add_argument("--no-triggers", action="store_true", help="leave the skills' triggers out of the index")
    parser.add_argument("--embedder", choices=("none", "wordllama"), default="none",
                        help="also fuse this embedding model (wordllama: bundled weights, runs offline)")
    parser.add_argument("--show-misses", action="store_true", help="list wrong hints")
    args = parser.parse_args(argv)
    return 0 if run(args.cases, args.skills, triggers=not args.no_triggers, embedder=embedder_named(args.embedder),
                    show_misses=args.show_misses) else 1


if __name__ == "__main__":
    raise SystemExit(main())
