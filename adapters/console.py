"""Terminal chat: the console is just another adapter.

Interactive (a TTY): deltas stream to the screen as they arrive. Scripted (stdin is a pipe): one user
message per line in, each final reply out, so the agent can be driven from shell scripts.
"""

from __future__ import annotations

import asyncio
import getpass
import sys
import uuid
from typing import Protocol, TextIO

from hermes_engine.ports.engine import EnginePort
from hermes_engine.ports.inbound import ChatKind, InboundMessage, ReplyTarget
from hermes_engine.ports.reply import ReplyStream


class ConsoleStream(ReplyStream):
    def __init__(self, console: ConsoleOutlet) -> None:
        self.console = console
        self.streamed = False

    async def push(self, delta: str) -> None:
        if self.console.interactive:
            self.console.out.write(delta)
            self.console.out.flush()
            self.streamed = True

    async def rewind(self) -> None:
        """A terminal cannot take text back: say that the answer starts again below."""
        if self.streamed:
            self.console.out.write("\n[the model's answer broke off; it starts again]\n")
            self.console.out.flush()

    async def finish(self, text: str) -> None:
        if self.streamed:
            self.console.out.write("\n")
        else:
            self.console.out.write(text + "\n")
        self.console.out.flush()
        self.console.replied.set()

    async def abort(self, note: str | None = None) -> None:
        await self.finish(note or "")


class ConsoleOutlet:
    platform = "console"

    def __init__(self, out: TextIO | None = None, interactive: bool | None = None) -> None:
        self.out = out or sys.stdout
        self.interactive = sys.stdin.isatty() if interactive is None else interactive
        self.replied = asyncio.Event()
        self.user = getpass.getuser()

    def open_stream(self, target: ReplyTarget, *, idempotency_key: str) -> ReplyStream:
        return ConsoleStream(self)

    async def send(self, target: ReplyTarget, text: str, *, idempotency_key: str | None = None) -> None:
        self.out.write(text + "\n")
        self.out.flush()
        self.replied.set()

    async def typing(self, target: ReplyTarget) -> None:
        return None

    def message(self, text: str) -> InboundMessage:
        return InboundMessage(platform="console", account="local", chat_kind=ChatKind.DM, chat_id=self.user,
                              user_id=self.user, user_name=self.user, text=text, message_id=uuid.uuid4().hex)


class ConsoleEngine(EnginePort, Protocol):
    """The console drives the engine itself (no server around it): it also starts it and waits for it."""

    async def start(self) -> None: ...

    @property
    def busy(self) -> bool: ...


async def chat(gateway: ConsoleEngine, stdin: TextIO | None = None, out: TextIO | None = None) -> None:
    """Run a terminal conversation until end of input (or /quit)."""
    stdin = stdin or sys.stdin
    console = ConsoleOutlet(out=out, interactive=stdin.isatty())
    gateway.attach(console)
    await gateway.start()
    if console.interactive:
        console.out.write(f"Hermes ({gateway.bot}) — /help for commands, Ctrl-D to quit.\n")
    while True:
        if console.interactive:
            try:
                line = await asyncio.to_thread(input, "you> ")
            except EOFError:
                break
        else:
            line = await asyncio.to_thread(stdin.readline)
            if not line:
                await settle(gateway)  # a /goal goes on working after "Goal set": let it finish first
                break
        line = line.rstrip("\n")
        if not line.strip():
            continue
        if line.strip() in ("/quit", "/exit"):
            break
        console.replied.clear()
        if console.interactive:
            console.out.write("hermes> ")
            console.out.flush()
        await gateway.handle(console.message(line))
        await console.replied.wait()


async def settle(gateway: ConsoleEngine, poll_seconds: float = 0.05) -> None:
    """Wait until no session has queued or running work and no background task (a goal's judge and its
    next turn, a review) is left: piped input usually ends long before a goal does."""
    while gateway.busy:  # noqa: ASYNC110 - the engine raises no idle event; a 50 ms poll is enough here
        await asyncio.sleep(poll_seconds)
