"""The engine's inbound boundary: whatever an adapter hands over is valid Unicode from there on."""

from __future__ import annotations

from dataclasses import replace

from hermes_engine.ports.inbound import (
    Attachment,
    ChatKind,
    InboundMessage,
    message_from_payload,
    message_to_payload,
)


def _message(text: str, **fields: object) -> InboundMessage:
    return InboundMessage(platform="slack", account="T1", chat_kind=ChatKind.DM, chat_id="D1", user_id="U1",
                          text=text, message_id="1", **fields)  # type: ignore[arg-type]


def test_lone_surrogates_and_nul_are_made_valid_in_every_text_an_adapter_hands_over():
    msg = _message("/goal ship \ud800it\x00", user_name="Ann\udfff",
                   attachments=(Attachment("document", "r\ud800.pdf", "application/pdf", 3),))
    assert msg.text == "/goal ship \ufffdit" and msg.command == "goal" and msg.args == "ship \ufffdit"
    assert msg.user_name == "Ann\ufffd" and msg.attachments[0].file_name == "r\ufffd.pdf"
    assert _message("x", command="goal", args="a\ud800").args == "a\ufffd"
    assert _message("\ud83d\ude00 split pair").text == "😀 split pair"  # a pair held as two halves is joined


def test_a_message_queued_before_the_check_is_made_valid_when_read_back():
    payload = {**message_to_payload(_message("hello")), "text": "queued \ud800 earlier"}
    assert message_from_payload(payload).text == "queued \ufffd earlier"


def test_a_pending_attachment_keeps_its_source_through_the_inbox_and_carries_no_credentials():
    offered = Attachment("", "shot.png", "image/png", 0, source="https://files.slack.com/files-pri/T1-F1/shot.png")
    read = message_from_payload(message_to_payload(_message("look", attachments=(offered,))))
    assert read.attachments == (offered,) and read.attachments[0].pending
    assert "token" not in str(message_to_payload(read)).lower()


def test_an_attachment_fetched_or_refused_is_not_pending_and_an_older_payload_still_reads():
    fetched = Attachment("photo", "shot.png", "image/png", 9, "/home/a/shot.png", source="https://x/shot.png")
    refused = Attachment("photo", "big.png", "image/png", 9, None, "too big", source="https://x/big.png")
    assert not fetched.pending and not refused.pending
    payload = message_to_payload(_message("look", attachments=(fetched,)))
    del payload["attachments"][0]["source"]  # recorded before attachments had a source
    assert message_from_payload(payload).attachments == (replace(fetched, source=None),)
