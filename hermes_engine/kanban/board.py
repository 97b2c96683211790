"""The board as Markdown (adapters render it per platform), and parsing /kanban's words."""

from __future__ import annotations

from collections.abc import Sequence

from hermes_engine.ports.storage import CARD_STATUSES, CardEvent, CardRecord

COLUMNS = ("triage", "todo", "ready", "running", "blocked", "done")
ICONS = {"triage": "📥", "todo": "📋", "ready": "🟢", "running": "⚙️", "blocked": "⛔", "done": "✅",
         "archived": "🗄"}
MAX_DONE_SHOWN = 10


def _line(card: CardRecord) -> str:
    extra = ""
    if card.depends_on:
        waiting = card.status == "todo" and (card.reason or "").startswith("waiting for its parts")
        after = "waiting for its parts" if waiting else "after"
        extra += f" ({after} " + ", ".join(f"#{d}" for d in card.depends_on) + ")"
    if card.status == "blocked" and card.reason:
        extra += f" — {card.reason[:120]}"
    return f"- #{card.id} {card.title}{extra}"


def render_board(cards: Sequence[CardRecord]) -> str:
    if not cards:
        return "The board is empty. Add a card with /kanban add <title>."
    parts = []
    for column in COLUMNS:
        in_column = [c for c in cards if c.status == column]
        if not in_column:
            continue
        if column == "done" and len(in_column) > MAX_DONE_SHOWN:
            hidden = len(in_column) - MAX_DONE_SHOWN
            in_column = in_column[-MAX_DONE_SHOWN:]
            parts.append(f"**{ICONS[column]} {column}** ({hidden} older not shown)")
        else:
            parts.append(f"**{ICONS[column]} {column}**")
        parts.extend(_line(c) for c in in_column)
    return "\n".join(parts)


def render_card(card: CardRecord, events: Sequence[CardEvent]) -> str:
    lines = [f"**#{card.id} {card.title}** — {ICONS.get(card.status, '')} {card.status}"]
    if card.body.strip():
        lines.append(card.body.strip())
    if card.depends_on:
        lines.append("Depends on: " + ", ".join(f"#{d}" for d in card.depends_on))
    if card.parent_id:
        lines.append(f"Part of: #{card.parent_id}")
    if card.goal_mode:
        lines.append("Goal mode: judged until done")
    lines.append(f"Profile: {card.profile} · attempts: {card.attempts}")
    if card.spent.model_calls:
        lines.append(f"Spent: {card.spent.describe()}")
    if card.reason:
        lines.append(f"Reason: {card.reason}")
    if card.result:
        lines.append(f"Result:\n{card.result}")
    if events:
        lines.append("History:")
        for e in events[-15:]:
            move = f" {e.from_status or ''}→{e.to_status}" if e.to_status else ""
            why = f": {e.reason}" if e.reason else ""
            lines.append(f"- {e.created_at:%Y-%m-%d %H:%M:%S} {e.actor} {e.kind}{move}{why}")
    return "\n".join(lines)


def parse_status(word: str) -> str:
    word = word.strip().lower()
    if word not in CARD_STATUSES:
        raise ValueError(f"unknown status {word!r}; use one of {', '.join(CARD_STATUSES)}")
    return word


def parse_card_id(word: str) -> int:
    try:
        return int(word.strip().lstrip("#"))
    except ValueError:
        raise ValueError(f"{word!r} is not a card number (like #12)") from None
