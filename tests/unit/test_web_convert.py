"""A fetched body as the model reads it: HTML as Markdown without what is never read, text and JSON as they
are, binaries refused by type."""

from __future__ import annotations

import pytest

from hermes_engine.tools.web.convert import MAX_HTML_CHARS, NotReadable, html_to_markdown, readable
from hermes_engine.tools.web.fetch import Fetched


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
