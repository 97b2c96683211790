"""Which models see images, and what a model that does not is sent instead.

Images reach a model from people (attachments) and from tools (an MCP server's picture, an image
`web_fetch` read); a tool hands on only `IMAGE_TYPES` up to `MAX_IMAGE_BYTES`. Every model is
taken to accept them unless `HERMES_TEXT_ONLY_MODELS` names it: comma-separated specs, `provider:*` for
every model of a provider (a local server's text model would refuse the request). Such a model gets the
text alone: each image is already described there, and a tool result says its image was left out.
"""

from __future__ import annotations

from dataclasses import replace

from hermes_engine.ports.conversation import Message

TEXT_ONLY_VARIABLE = "HERMES_TEXT_ONLY_MODELS"
IMAGE_TYPES = frozenset({"image/png", "image/jpeg", "image/gif", "image/webp"})  # what every provider takes
MAX_IMAGE_BYTES = 3_750_000  # decoded; its base64 stays under the providers' 5 MB per image
LEFT_OUT = "[this model takes text only: the image(s) above were not shown to it]"


def takes_images(spec: str, text_only: str | None) -> bool:
    """False when `spec` ("provider:model") is listed in `text_only` (the variable's value)."""
    provider = spec.partition(":")[0]
    listed = {item.strip().lower() for item in (text_only or "").split(",") if item.strip()}
    return spec.lower() not in listed and f"{provider}:*" not in listed


def for_model(messages: tuple[Message, ...], images: bool) -> tuple[Message, ...]:
    """The history as a model that does (`images`) or does not take images may be sent it."""
    if images or not any(m.images for m in messages):
        return messages
    return tuple(replace(m, images=(), content=f"{m.content}\n{LEFT_OUT}" if m.role == "tool" else m.content)
                 if m.images else m for m in messages)
