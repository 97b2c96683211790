"""How a feature adds to the prompt: a section frozen into the system prompt, a note on one user message."""

from __future__ import annotations

from typing import ClassVar

from hermes_engine.ports.session import SessionScope


class PromptContributor:
    """An extension point: memory, skills and goals add to the prompt through this. Both hooks default
    to adding nothing.

    A contributor whose turn notes are private to the speaker (their profile) sets `private_notes = True`:
    such a note reaches the model only in the turn it belongs to and is never stored in the shared
    history, so in a group nobody else's turn carries it."""

    private_notes: ClassVar[bool] = False

    async def frozen_section(self, scope: SessionScope) -> str | None:
        """Text for the system prompt, taken once at session start and never changed during it."""
        return None

    async def turn_note(self, scope: SessionScope, speaker_person_id: int | None, text: str) -> str | None:
        """Text attached to this user message only (per-turn hints; the speaker's profile in groups)."""
        return None
