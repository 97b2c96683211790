"""How the engine fetches a file a person sent: the platform's `AttachmentFetcher`, asked in the turn.

An adapter hands a message over with its files pending (`Attachment.source`, no `path`), so the durable inbox
records the message before any download starts: the platform has been told it arrived (Slack's Bolt acks at
once, Discord does not send an event again), and a crash in the middle of a download must not lose it. The
turn's prepare phase then asks the fetcher of the message's platform for each pending file; a replay after a
crash asks again for what was not fetched, and a fetcher finds a file it already fetched on disk instead of
downloading it twice. An adapter that receives files offers its fetcher with itself when it is attached to
the gateway as the platform's outlet (`FetchesAttachments`); the bot token stays with the adapter.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Protocol, runtime_checkable

from hermes_engine.ports.inbound import Attachment


@dataclass(frozen=True)
class FetchedAttachment:
    """One pending file once asked for: fetched (`attachment.path`) or refused (`attachment.refused_reason`),
    and the one sentence the person is told when it was refused for its size."""

    attachment: Attachment
    notice: str | None = None


class AttachmentFetcher(Protocol):
    """One platform's downloads: the bot's credentials are added here, at download time, never stored."""

    @property
    def platform(self) -> str: ...

    async def fetch_pending(self, attachments: tuple[Attachment, ...], session_key: str,
                            message_id: str) -> list[FetchedAttachment]:
        """Each of `attachments` (all pending, in the message's order) fetched into the session's attachment
        folder; one already fetched there for this message (before a crash) is found, not fetched again.
        Never raises for a file that cannot be had: it comes back refused, with its reason."""
        ...


@runtime_checkable
class FetchesAttachments(Protocol):
    """An `Outlet` whose platform receives files: the turn asks it for its fetcher, so the fetcher comes
    with the adapter when the adapter is attached to the gateway."""

    def attachment_fetcher(self) -> AttachmentFetcher | None: ...


__all__ = ["AttachmentFetcher", "FetchedAttachment", "FetchesAttachments"]
