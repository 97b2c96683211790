"""How many images of an MCP result go to the model, and which are only described: at most `MAX_IMAGES`
per result, each up to `MAX_IMAGE_BYTES`, of a type every provider takes, valid base64."""

from __future__ import annotations

import base64

from hermes_engine.mcp.remote import RemotePart, RemoteResult
from hermes_engine.mcp.results import MAX_IMAGE_BYTES, MAX_IMAGES, render


def image(size: int, mime: str = "image/png") -> RemotePart:
    return RemotePart("image", data=base64.b64encode(b"x" * size).decode(), mime_type=mime)


def test_images_beyond_the_count_are_described_and_not_attached():
    text, images = render(RemoteResult([image(10) for _ in range(MAX_IMAGES + 2)]))
    assert len(images) == MAX_IMAGES
    assert text.count("attached to this result") == MAX_IMAGES
    assert text.count(f"only {MAX_IMAGES} images per result are shown") == 2


def test_a_too_large_an_unknown_type_and_a_broken_image_are_only_described():
    text, images = render(RemoteResult([image(MAX_IMAGE_BYTES + 1), image(10, "image/tiff"),
                                        RemotePart("image", data="not base64!", mime_type="image/png"),
                                        image(10, "image/jpeg")]))
    assert [i.media_type for i in images] == ["image/jpeg"]
    lines = text.split("\n")
    assert f"over {MAX_IMAGE_BYTES:,} bytes, not shown" in lines[0]
    assert "a type models do not take, not shown" in lines[1]
    assert "not valid base64, not shown" in lines[2]
    assert lines[3] == "[image image/jpeg, 10 bytes: image 1 attached to this result]"
