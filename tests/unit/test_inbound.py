"""The engine's inbound boundary: whatever an adapter hands over is valid Unicode from there on."""

from __future__ import annotations

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
