"""Slack's `FileTransport`: a file into the conversation's channel or thread by Slack's current upload flow,
`files.getUploadURLExternal`, the bytes to the URL it gives, then `files.completeUploadExternal` sharing it
with the caption as its comment (slack-sdk's `files_upload_v2`; `files.upload` is retired).

The three steps are one call for the pacer: a 429 on any of them waits in the channel's lane and the whole
upload is tried again. A file uploaded but never completed is not shared with anyone, so the retry never
shows it twice. The caption is plain text, escaped as every interim frame is, so it pings nobody.
"""

from __future__ import annotations

from slack_sdk.errors import SlackRequestError

from adapters.slack.outbound import escape
from adapters.slack.web_api import SlackCallError, SlackWebApi
from hermes_engine.ports.inbound import ReplyTarget
from hermes_engine.ports.reply import OutgoingFile

# Below Slack's own limit (1 GB): a file is held in memory while it is sent, and Slack's web client gives a call
# 30 s, so the gateway's cap is what one upload can carry within them.
MAX_FILE_BYTES = 50 * 1024 * 1024


class SlackUploads:
    def __init__(self, api: SlackWebApi) -> None:
        self.api = api

    def max_file_bytes(self, media_type: str) -> int:
        return MAX_FILE_BYTES

    async def send_file(self, target: ReplyTarget, file: OutgoingFile) -> str:
        """Returns the shared file's id (Slack posts the message that carries it on its own)."""
        try:
            data = await self.api.call("files.upload_v2", channel=target.chat_id, thread_ts=target.thread_id,
                                       content=file.data, filename=file.name, title=file.name,
                                       initial_comment=escape(file.caption) or None)
        except SlackRequestError as exc:  # the upload step itself was refused
            raise SlackCallError(f"Slack file upload failed: {exc}", error="upload_failed") from None
        shared = data.get("files") or [data.get("file") or {}]
        return str(shared[0].get("id") or "")
