"""A fetched body as the model reads it: HTML as Markdown without what is never read, text and JSON as they
are, binaries refused by the type their bytes name, images described and attached."""

from __future__ import annotations

import base64

import pytest

from hermes_engine.ports.conversation import ImagePart
from hermes_engine.web.convert import MAX_HTML_CHARS, NotReadable, html_to_markdown, readable
from hermes_engine.web.fetch import Fetched
from hermes_engine.web.sniff import image


def body(data: bytes, media: str, charset: str | None = None) -> Fetched:
    return Fetched("https://site.test/x", 200, media, charset, data, False)


def test_scripts_and_styles_are_dropped_and_an_unclosed_script_eats_the_rest():
    html = ("<title>T</title><style>p{}</style><p>kept <SCRIPT type=x>alert(1)</script >too</p>"
            "<script>never closed <p>hidden</p>")
    assert html_to_markdown(html) == "# T\n\nkept too"


def test_markup_past_the_cap_is_left_out_and_the_text_says_so():
    text = html_to_markdown("<p>" + "a" * (MAX_HTML_CHARS + 10) + "</p>")
    assert text.endswith("only its start was read]")
    assert text.count("a") < MAX_HTML_CHARS + 10


def test_json_is_laid_out_and_text_kept_as_it_is():
    assert readable(body(b'{"tide":"06:12"}', "application/problem+json")) == '{\n "tide": "06:12"\n}'
    assert readable(body("Grüße".encode("latin-1"), "text/plain", "latin-1")) == "Grüße"
    assert readable(body(b"plain", "text/plain", "no-such-charset")) == "plain"


@pytest.mark.parametrize("media, data", [("application/pdf", b"%PDF-1.7"), ("", b"\x00\x01binary")])
def test_binaries_are_refused_by_type(media, data):
    with pytest.raises(NotReadable, match="not a web page"):
        readable(body(data, media))


PNG = bytes.fromhex("89504e470d0a1a0a0000000d4948445200000001000000010806000000"
                    "1f15c4890000000d49444154789c6360000002000001e221bc330000000049454e44ae426082")
ZIP = b"PK\x03\x04\x14\x00\x00\x00\x08\x00" + bytes(40)


def test_a_png_served_as_html_is_refused_as_the_image_its_bytes_are():
    with pytest.raises(NotReadable, match=r"is image/png \(served as text/html\), not a web page"):
        readable(body(PNG, "text/html", "utf-8"))


def test_an_archive_served_as_text_is_refused_by_its_real_type():
    with pytest.raises(NotReadable, match=r"is application/zip \(served as text/plain\)"):
        readable(body(ZIP, "text/plain"))


def test_binary_no_magic_number_names_is_refused_even_when_served_as_html():
    with pytest.raises(NotReadable, match="binary data of a type web_fetch does not know"):
        readable(body(b"\x13\x37\x00\x00\x02garbage\x00", "text/html"))


def test_a_utf16_page_is_read_although_its_bytes_hold_nul():
    assert readable(body("<p>Gezeiten</p>".encode("utf-16-le"), "text/html", "utf-16-le")) == "Gezeiten"


def test_an_image_is_attached_when_models_take_it_and_described_when_not():
    seen = image(body(PNG, "text/html"), "image/png")
    assert seen.parts == (ImagePart("image/png", base64.b64encode(PNG).decode()),)
    assert seen.description == ("[image image/png (served as text/html) from https://site.test/x, 67 bytes: "
                                "attached to this result]")
    tiff = image(body(b"II*\x00" + bytes(20), "image/tiff"), "image/tiff")
    assert tiff.parts == () and "image/tiff from https://site.test/x, 24 bytes: a type models do not take" in tiff.description
    cut = image(Fetched("https://site.test/x", 200, "image/png", None, PNG, True), "image/png")
    assert cut.parts == () and "larger than the 67 bytes web_fetch reads: not shown" in cut.description
