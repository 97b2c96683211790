"""Approvals asked on the terminal the gateway runs in: the operator at the console answers as an admin.

The question is printed with the command and why it needs approval; a line of `y` approves once, `s`
approves that kind of command for the rest of the session, anything else denies.
"""

from __future__ import annotations

import asyncio
from typing import TextIO

from hermes_engine.ports.approval import ApprovalAnswers, ApprovalRequest, Decision

_CHOICES = {"y": Decision.ONCE, "yes": Decision.ONCE, "s": Decision.SESSION, "session": Decision.SESSION}


class ConsoleAsker:
    def __init__(self, reader: TextIO, writer: TextIO, operator_id: str) -> None:
        self.reader, self.writer, self.operator_id = reader, writer, operator_id
        self._tasks: set[asyncio.Task[None]] = set()

    def take_presses(self, answers: ApprovalAnswers) -> None:
        """The console answers only the question it asks (its `ask` reads the line)."""

    async def ask(self, request: ApprovalRequest, answers: ApprovalAnswers) -> None:
        self.writer.write(f"\n{request.question} ({request.risk}: {request.reason})\n  {request.command}\n"
                          "[y] once  [s] for this session  [anything else] deny: ")
        self.writer.flush()
        task = asyncio.create_task(self._read(request, answers))
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    async def _read(self, request: ApprovalRequest, answers: ApprovalAnswers) -> None:
        line = await asyncio.to_thread(self.reader.readline)
        answers.answer(request.id, self.operator_id, _CHOICES.get(line.strip().lower(), Decision.DENY))

    async def settled(self, request: ApprovalRequest, decision: Decision, note: str) -> None:
        self.writer.write(f"[{request.command[:60]}: {note}]\n")
        self.writer.flush()
