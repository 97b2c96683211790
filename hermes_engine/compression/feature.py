"""Compression as a feature: the hook around every model call, hygiene before a turn, `/compress`, and the
context line in `/status`. The mechanics live in the package's other modules (`service` for the per-session
hook); this wires them to the host."""

from __future__ import annotations

from typing import TYPE_CHECKING

from hermes_engine.compression.planning import is_summary
from hermes_engine.compression.service import CompactionService, SessionContext
from hermes_engine.ports.commands import CommandContext, CommandRegistry
from hermes_engine.ports.feature import Feature
from hermes_engine.ports.session import SessionScope

if TYPE_CHECKING:
    from hermes_engine.ports.host import Host
    from hermes_engine.ports.inbound import InboundMessage
    from hermes_engine.ports.session import SessionHandle


class CompressionFeature(Feature):
    name = "compression"

    def __init__(self) -> None:
        self.service: CompactionService | None = None

    async def start(self, host: Host) -> None:
        self.service = CompactionService(host)

    async def call_hook(self, session: SessionHandle, message: InboundMessage | None) -> SessionContext | None:
        """Hygiene now (a history already too large for the window is compressed before the turn), then
        the per-call hook that keeps each request under the threshold."""
        if self.service is None:
            return None
        context = self.service.context(session, message)
        await context.hygiene()
        return context

    def on_session_evicted(self, scope: SessionScope) -> None:
        if self.service is not None:
            self.service.forget(scope.session_id)

    def register_commands(self, registry: CommandRegistry) -> None:
        registry.command("compress", "shrink this conversation's context now (nothing is deleted)")(self._compress)

    async def _compress(self, ctx: CommandContext) -> str:
        assert self.service is not None
        session = ctx.session
        await ctx.host.ensure_loaded(session, ctx.person_id)
        context = self.service.context(session, ctx.message)  # its summary is on whoever asked for it
        report = await context.compress_now()
        window = context.window()
        before, after = report.tokens_before, report.tokens_after
        sizes = f"~{before:,} → ~{after:,} tokens (context window {window:,})"
        if report.failed and not report.pruned:
            return f"Could not compress right now: {report.failed}. The conversation is unchanged (~{before:,} tokens)."
        if report.failed:
            return (f"Could not summarise right now ({report.failed}); trimmed {report.pruned} old tool "
                    f"output{'s' if report.pruned != 1 else ''} instead: {sizes}.")
        if not report.changed:
            return f"Nothing to compress yet: the conversation is ~{before:,} tokens (context window {window:,})."
        parts = []
        if report.summarised:
            parts.append(f"summarised {report.summarised} earlier messages")
        if report.pruned:
            parts.append(f"trimmed {report.pruned} old tool output{'s' if report.pruned != 1 else ''}")
        return f"Compressed: {sizes}; {' and '.join(parts)}. Nothing was deleted — session_search still finds it."

    async def status_lines(self, scope: SessionScope, person_id: int | None) -> list[str]:
        if self.service is None:
            return []
        session = self.service.host.session_by_id(scope.session_id)
        if session is None or not session.history.loaded:
            return []
        context = self.service.context(session)
        view = session.history.view()
        tokens, window = context.measure(view), context.window()
        summary = next((m for m in view if is_summary(m)), None)
        line = f"Context: ~{tokens:,} of {window:,} tokens ({tokens * 100 // max(1, window)}%)"
        if summary is not None:
            line += f", earlier part summarised (compaction #{summary.meta['compaction'].get('id')})"
        return [line]
