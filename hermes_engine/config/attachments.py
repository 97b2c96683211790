"""A profile's `attachments:` — how long the files people send are kept."""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict, Field


class AttachmentSettings(BaseModel):
    """`retention_days`: files people sent are deleted from their conversation's attachment folder once they
    are older than this (0: kept until `/forget`). The default, 30 days, covers the follow-ups a conversation
    has ("the PDF from last week") without keeping what people sent, often personal, for longer than it is
    of use, and bounds the disk the attachment folders take."""

    model_config = ConfigDict(extra="forbid")

    retention_days: float = Field(30.0, ge=0)
