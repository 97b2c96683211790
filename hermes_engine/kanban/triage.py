"""Triage: a card put in `triage` is split by the model into smaller cards with dependencies, or, when it is
small enough or the model's answer is not usable, moved to `todo` as it is. The card stays as the parent of
its parts and is archived once split."""

from __future__ import annotations

import json
import logging
import re
from typing import TYPE_CHECKING

from hermes_engine.config import KanbanSettings
from hermes_engine.errors import HermesError
from hermes_engine.policy.limits import charge
from hermes_engine.ports.conversation import Message, Usage
from hermes_engine.ports.models import Completed, ModelRequest
from hermes_engine.ports.storage import CardRecord, CardSpec

if TYPE_CHECKING:
    from hermes_engine.ports.host import Host

log = logging.getLogger(__name__)

DECOMPOSE_SYSTEM = """\
You split a task into at most 6 smaller tasks that can be worked on separately. Reply with JSON only:
{"tasks": [{"title": "...", "body": "...", "after": [<positions of tasks it waits for, from 1>]}]}
Reply {"tasks": []} when the task is small enough to do as it is."""

_JSON = re.compile(r"\{.*\}", re.S)


def parse_parts(text: str) -> list[dict[str, object]] | None:
    match = _JSON.search(text)
    try:
        data = json.loads(match.group(0) if match else text)
    except (json.JSONDecodeError, TypeError):
        return None
    tasks = data.get("tasks") if isinstance(data, dict) else None
    if not isinstance(tasks, list) or not all(isinstance(t, dict) and str(t.get("title", "")).strip()
                                              for t in tasks):
        return None
    return tasks[:6]


class Triage:
    def __init__(self, host: Host, settings: KanbanSettings) -> None:
        self.host = host
        self.settings = settings

    async def decompose(self, card: CardRecord) -> None:
        store = self.host.store
        parts = await self._ask(card)
        if not parts:
            await store.move_card(card.id, "todo", actor="triage", reason="taken as it is")
            return
        specs = []
        for i, part in enumerate(parts, start=1):
            after = part.get("after")
            deps = tuple(str(a) for a in (after if isinstance(after, list) else [])
                         if isinstance(a, int) and 1 <= a <= len(parts) and a != i)
            specs.append(CardSpec(title=str(part["title"]), body=str(part.get("body") or ""), profile=card.profile,
                                  key=str(i), depends_on=deps, parent_id=card.id, origin=card.origin,
                                  owner_id=card.owner_id, shared_in=card.shared_in))
        try:
            made = await store.create_cards(specs, actor="triage")
        except ValueError as exc:  # e.g. the model drew a cycle: keep the card whole
            await store.move_card(card.id, "todo", actor="triage", reason=f"not split: {exc}")
            return
        await store.move_card(card.id, "archived", actor="triage",
                              reason="split into " + ", ".join(f"#{c.id}" for c in made))

    async def _ask(self, card: CardRecord) -> list[dict[str, object]] | None:
        models = [self.settings.model] if self.settings.model else self.host.profile.models(self.host.settings)
        request = ModelRequest(system=DECOMPOSE_SYSTEM, max_tokens=1000, purpose="kanban-triage",
                               messages=(Message(role="user", content=f"{card.title}\n\n{card.body}"),))
        text, spent = "", Usage()
        try:
            async for event in self.host.chain(models).route().stream(request):
                if isinstance(event, Completed):
                    text = event.response.text
                    spent.add(event.response.usage)
        except HermesError as exc:
            log.warning("kanban triage of card %s failed: %s", card.id, exc)
            return None
        finally:  # the card's maker pays for its split, as for its workers
            self.host.spawn(charge(self.host, card.person_id, spent), "usage-tokens")
        return parse_parts(text)
