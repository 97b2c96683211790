"""The learning curve: the same task families run through the real engine with its learning loops on and off.

The engine is the real gateway (SQLite, the OpenAI SDK) against the fake LLM driven by a fixed scripted
policy (`scripted_model.py`). Loops on: the background review may save a skill after a long task, and
later requests carry the hint ranker's suggestions. Loops off: the review never runs. The policy is the
same in both runs, so the difference between the curves is what the engine changes: whether the review
saved the procedure in time, whether the right skill was hinted, and what the index and hints cost.

    python tests/learning/learning_curve.py --out docs/learning_curve.png

prints a markdown table and writes it beside the plot (.md and .csv).
"""

from __future__ import annotations

import argparse
import asyncio
import csv
import json
import os
import sys
import tempfile
import time
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
for path in (HERE, HERE.parent):  # tests/learning (the suite) and tests/ (fakes, engine_harness)
    if str(path) not in sys.path:
        sys.path.insert(0, str(path))

from engine_harness import Engine, fake_llm_environment, make_profile  # noqa: E402
from environment import FAMILIES, LOOKUP, Family  # noqa: E402
from fakes.fake_llm import FakeLLM, RecordedRequest  # noqa: E402
from scripted_model import REVIEW, SKILL_NAMES, calls_since, respond  # noqa: E402

RUNS = ("on", "off")


@dataclass
class TaskRow:
    run: str  # "on" | "off"
    family: str
    step: int  # 1-based position of the task within its family
    subject: str
    tool_calls: int  # by the agent answering the task (skill_view included)
    skill_views: int
    hinted: str  # the skills the hint named on the task's request, in order ("" when none)
    model_calls: int
    tokens: int  # request (chars / 4, as the fake bills) + reply tokens of the task's model calls
    skill_tokens: int  # of which the skills index and hint on the task's first request
    engine_ms: float  # wall time to the answer minus the fake LLM's own serving time
    review_calls: int  # model calls of the background review that followed the task
    review_tokens: int
    skills_after: int  # skills in the library once the task and its review were done


def profile(loops: bool) -> Any:
    """The default review settings when on; off: no review. The curator runs only when asked, in both."""
    review = {} if loops else {"memory_every_turns": 0, "skill_every_iterations": 0}
    return make_profile(review=review, skills={"curator_every_days": 0})


def schedule(families: tuple[Family, ...] = FAMILIES) -> list[tuple[Family, int, str]]:
    """Families interleaved (first task of each, then the second...), so hints must pick between skills."""
    rows = []
    for step in range(max(len(f.subjects) for f in families)):
        rows += [(f, step + 1, f.subjects[step]) for f in families if step < len(f.subjects)]
    return rows


def request_tokens(request: RecordedRequest) -> int:
    return len(json.dumps(request.body)) // 4


def skill_tokens(request: RecordedRequest) -> int:
    """The skills index in the system prompt plus the hint riding on the user message (chars / 4)."""
    system = request.system
    at = system.find("# Skills\n")
    index = system[at:].split("\n# ", 1)[0] if at >= 0 else ""
    return (len(index) + len(task_note(request.last_user_text))) // 4


def hinted(request: RecordedRequest) -> list[str]:
    """The skill names in the hint riding on the user message, as the scripted model reads them."""
    return SKILL_NAMES.findall(task_note(request.last_user_text))


def task_note(user_text: str) -> str:
    at = user_text.find("(Skills that may fit")
    return user_text[at:] if at >= 0 else ""


def reply_tokens(requests: list[RecordedRequest], following: list[RecordedRequest]) -> int:
    """What the model wrote: each request's reply is the next request's new assistant message."""
    total = 0
    for request in following:
        last = request.messages[-1] if request.messages else {}
        for m in reversed(request.messages):
            if m.get("role") == "assistant":
                last = m
                break
        total += len(json.dumps(last)) // 4
    return total + 16 * (len(requests) - len(following))  # the final answers: short sentences


async def run_tasks(engine: Engine, fake: FakeLLM, run: str) -> list[TaskRow]:
    """Every task of every family, each in its own chat (a fresh session), in `schedule` order."""
    assert engine.gateway is not None
    engine.gateway.tools.register(LOOKUP)
    fake.responder = respond
    skills = next(f for f in engine.gateway.features if f.name == "skills")
    rows = []
    for n, (family, step, subject) in enumerate(schedule()):
        first = len(fake.requests)
        started = time.perf_counter()
        await engine.say(family.task.format(s=subject), chat=f"{run}-task-{n}", timeout=30)
        wall = time.perf_counter() - started
        answered = len(fake.requests)
        await engine.idle(timeout=30)
        task = [r for r in fake.requests[first:answered] if REVIEW not in r.last_user_text]
        reviews = [r for r in fake.requests[first:] if REVIEW in r.last_user_text]
        calls = calls_since(task[-1].messages, max(i for i, m in enumerate(task[-1].messages) if m["role"] == "user"))
        served = sum(r.served_seconds for r in task)
        rows.append(TaskRow(
            run=run, family=family.name, step=step, subject=subject, tool_calls=len(calls),
            skill_views=sum(1 for c in calls if c.name == "skill_view"), hinted=" ".join(hinted(task[0])),
            model_calls=len(task),
            tokens=sum(request_tokens(r) for r in task) + reply_tokens(task, task[1:]),
            skill_tokens=skill_tokens(task[0]), engine_ms=round(1000 * (wall - served), 1),
            review_calls=len(reviews), review_tokens=sum(request_tokens(r) for r in reviews),
            skills_after=len(await skills.raw_library().list_skills())))
    fake.responder = None
    return rows


# ------------------------------------------------------------------------------------------------ output

COLUMNS = [f for f in TaskRow.__dataclass_fields__]


def markdown(rows: list[TaskRow]) -> str:
    lines = ["| " + " | ".join(COLUMNS) + " |", "|" + "---|" * len(COLUMNS)]
    lines += ["| " + " | ".join(str(v) for v in asdict(r).values()) + " |" for r in rows]
    return "\n".join(lines)


def summary(rows: list[TaskRow]) -> dict[str, float]:
    """Mean tool calls and tokens of the first and the last task of each family, per run."""
    out: dict[str, float] = {}
    for run in RUNS:
        mine = [r for r in rows if r.run == run]
        if not mine:
            continue
        last = max(r.step for r in mine)
        for label, step in (("first", 1), ("last", last)):
            chosen = [r for r in mine if r.step == step]
            out[f"{run}_{label}_tool_calls"] = round(sum(r.tool_calls for r in chosen) / len(chosen), 2)
            out[f"{run}_{label}_tokens"] = round(sum(r.tokens for r in chosen) / len(chosen))
    return out


def summary_markdown(stats: dict[str, float]) -> str:
    lines = ["| run | tool calls, first task | tool calls, last task | tokens, first task | tokens, last task |",
             "|---|---|---|---|---|"]
    for run in RUNS:
        if f"{run}_first_tool_calls" in stats:
            lines.append(f"| loops {run} | {stats[f'{run}_first_tool_calls']} | {stats[f'{run}_last_tool_calls']} | "
                         f"{stats[f'{run}_first_tokens']:.0f} | {stats[f'{run}_last_tokens']:.0f} |")
    return "\n".join(lines)


def plot(rows: list[TaskRow], out: Path) -> None:
    import matplotlib  # the dev extra; only the plot needs it

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    panels = (("tool_calls", "Tool calls per task", "tool calls"),
              ("tokens", "Tokens per task (requests + replies)", "tokens"),
              ("skill_tokens", "Skills index + hint, first request", "tokens"))
    fig, axes = plt.subplots(1, len(panels), figsize=(15, 4.4))
    for i, family in enumerate(FAMILIES):
        for run, style in (("on", "-o"), ("off", "--x")):
            mine = sorted((r for r in rows if r.run == run and r.family == family.name), key=lambda r: r.step)
            steps = [r.step + 0.05 * (i - 1) for r in mine]  # nudged apart: equal curves would hide each other
            for ax, (field, _, _) in zip(axes, panels, strict=True):
                ax.plot(steps, [getattr(r, field) for r in mine], style, label=f"{family.name}, loops {run}")
    for ax, (_, title, unit) in zip(axes, panels, strict=True):
        ax.set(title=title, xlabel="task of the family", ylabel=unit)
        ax.set_xticks(sorted({r.step for r in rows}))
        ax.grid(alpha=0.3)
    axes[0].legend(fontsize=7)
    fig.text(0.5, 0.01, "Scripted model, fixed policy, identical in both runs: the gap is what the engine's "
             "review and hints change.", ha="center", fontsize=8)
    fig.tight_layout(rect=(0, 0.04, 1, 1))
    fig.savefig(out, dpi=110)
    plt.close(fig)


def write_tables(rows: list[TaskRow], out: Path) -> tuple[Path, Path]:
    csv_path, md_path = out.with_suffix(".csv"), out.with_suffix(".md")
    out.parent.mkdir(parents=True, exist_ok=True)
    with csv_path.open("w", newline="", encoding="utf-8") as fh:
        writer = csv.DictWriter(fh, fieldnames=COLUMNS)
        writer.writeheader()
        writer.writerows(asdict(r) for r in rows)
    md_path.write_text(summary_markdown(summary(rows)) + "\n\n" + markdown(rows) + "\n", encoding="utf-8")
    return csv_path, md_path


async def measure() -> list[TaskRow]:
    rows: list[TaskRow] = []
    async with FakeLLM() as fake:
        os.environ.update(fake_llm_environment(fake))
        for run in RUNS:
            home = Path(tempfile.mkdtemp(prefix=f"hermes-learning-{run}-"))
            engine = await Engine(home, profile(run == "on")).start()
            try:
                rows += await run_tasks(engine, fake, run)
            finally:
                await engine.stop()
    return rows


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--out", type=Path, default=Path("docs/learning_curve.png"), help="the PNG plot")
    args = parser.parse_args(argv)
    rows = asyncio.run(measure())
    print(summary_markdown(summary(rows)))
    print()
    print(markdown(rows))
    csv_path, md_path = write_tables(rows, args.out)
    plot(rows, args.out)
    print(f"\nwrote {args.out}, {csv_path}, {md_path}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
