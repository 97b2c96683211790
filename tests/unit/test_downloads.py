"""The download every adapter shares: capped while streaming, names that stay in their folder, the type
read from the bytes. Served by a real aiohttp server on loopback."""

from __future__ import annotations

import mimetypes
from pathlib import Path

import aiohttp
import pytest
from aiohttp import web
from aiohttp.test_utils import TestServer
from files_kit import png

from adapters.downloads import (
    MAX_NAME_BYTES,
    Downloads,
    Offered,
    Refused,
    TooBig,
    Transient,
    pending,
    safe_file_name,
    settled_kind,
    sniff,
    stream_to,
)
from hermes_engine.ports.inbound import Attachment


class Files:
    """What the server holds, how it answers, and what it was asked."""

    def __init__(self) -> None:
        self.bodies: dict[str, bytes] = {}
        self.chunked: set[str] = set()
        self.failures: dict[str, list[int]] = {}
        self.asked: list[str] = []
        self.sent: dict[str, int] = {}

    async def handle(self, request: web.Request) -> web.StreamResponse:
        name = request.match_info["name"]
        self.asked.append(name)
        failures = self.failures.get(name)
        if failures:
            return web.Response(status=failures.pop(0))
        body = self.bodies[name]
        response = web.StreamResponse()
        if name in self.chunked:
            response.enable_chunked_encoding()
        else:
            response.content_length = len(body)
        await response.prepare(request)
        self.sent[name] = 0
        try:
            for start in range(0, len(body), 16 * 1024):
                await response.write(body[start:start + 16 * 1024])
                self.sent[name] += len(body[start:start + 16 * 1024])
            await response.write_eof()
        except ConnectionResetError:
            pass
        return response


@pytest.fixture
async def served():
    files = Files()
    app = web.Application()
    app.router.add_get("/f/{name}", files.handle)
    server = TestServer(app, host="127.0.0.1")
    await server.start_server()
    files.url = lambda name: str(server.make_url(f"/f/{name}"))  # type: ignore[attr-defined]
    yield files
    await server.close()


@pytest.fixture
async def http():
    async with aiohttp.ClientSession(trust_env=False) as session:
        yield session


# -- names -----------------------------------------------------------------------------------------------

@pytest.mark.parametrize(("sent", "kept"), [
    ("../../etc/passwd", "passwd"),
    ("..\\..\\windows\\win.ini", "win.ini"),
    ("re\x00po\x1frt\x7f.txt", "report.txt"),
    ("invoice\u202egpj.exe", "invoicegpj.exe"),  # a right-to-left override would show it as "…exe.jpg"
    ("zero\u200bwidth.txt", "zerowidth.txt"),
    ("two\nlines\tand  tabs.md", "two lines and tabs.md"),
    ('a<b>c:d"e|f?g*.txt', "a_b_c_d_e_f_g_.txt"),
    ("...hidden", "hidden"),
    ("Скриншот 2026.png", "Скриншот 2026.png"),
])
def test_a_file_name_loses_what_could_climb_out_or_hide_and_keeps_what_it_said(sent, kept):
    assert safe_file_name(sent) == kept


@pytest.mark.parametrize("sent", ["", "..", "/", "\u202e\u202c", " . ", "___"])
def test_a_file_name_with_nothing_left_gets_a_name_of_its_own(sent):
    assert safe_file_name(sent, fallback="document") == "document"


def test_an_over_long_name_is_cut_to_its_bound_keeping_its_extension_and_whole_characters():
    cut = safe_file_name("ü" * 300 + ".pdf")
    assert len(cut.encode()) <= MAX_NAME_BYTES and cut.endswith(".pdf") and set(cut[:-4]) == {"ü"}


# -- types -----------------------------------------------------------------------------------------------

def test_the_type_is_what_the_bytes_say_not_what_the_sender_claims():
    assert sniff(png(), "text/plain", "notes.txt") == "image/png"
    assert sniff(b"just words, no picture\n", "image/png", "chart.png") == "text/plain"
    assert sniff(b"\x13\x00\x99binary without magic", "image/png", "chart.png") == "application/octet-stream"


def test_text_types_without_magic_numbers_keep_their_declared_or_named_type():
    assert sniff(b"a,b\n1,2\n", "text/csv", "t.csv") == "text/csv"
    assert sniff(b'{"a": 1}', "", "data.json") == "application/json"
    assert sniff(b"# Title\n", "", "notes.md") == (mimetypes.guess_type("notes.md")[0] or "text/plain")
    assert sniff("naïve text cut mid-character".encode()[:3], "", "x") == "text/plain"


# -- the stream ------------------------------------------------------------------------------------------

async def test_a_download_streams_into_place_and_keeps_the_first_bytes(served, http, tmp_path):
    served.bodies["shot.png"] = png()
    path = tmp_path / "conv" / "1-shot.png"
    saved = await stream_to(http, served.url("shot.png"), path, limit=1024 * 1024)
    assert path.read_bytes() == png() and saved.size == len(png()) and saved.head == png()
    assert [p.name for p in path.parent.iterdir()] == ["1-shot.png"]


async def test_a_stream_without_a_stated_size_stops_at_the_cap_and_leaves_nothing(served, http, tmp_path):
    served.bodies["big"] = b"x" * (2 * 1024 * 1024)
    served.chunked.add("big")
    path = tmp_path / "conv" / "1-big"
    with pytest.raises(TooBig) as refused:
        await stream_to(http, served.url("big"), path, limit=100 * 1024)
    assert 100 * 1024 < refused.value.size <= 100 * 1024 + 64 * 1024
    assert list(path.parent.iterdir()) == []  # neither the file nor its partial copy


async def test_a_declared_size_over_the_cap_is_refused_without_asking_for_the_bytes(served, http, tmp_path):
    served.bodies["big"] = b"x" * 10
    with pytest.raises(TooBig):
        await stream_to(http, served.url("big"), tmp_path / "big", limit=5, declared=6)
    assert served.asked == []


async def test_a_content_length_over_the_cap_is_refused_before_reading(served, http, tmp_path):
    served.bodies["big"] = b"x" * (1024 * 1024)
    with pytest.raises(TooBig) as refused:
        await stream_to(http, served.url("big"), tmp_path / "big", limit=1024, declared=10)  # the sender lied
    assert refused.value.size == 1024 * 1024 and not (tmp_path / "big").exists()


async def test_server_errors_are_worth_another_try_and_refusals_are_not(served, http, tmp_path):
    served.bodies["f"] = b"x"
    served.failures["f"] = [503, 404]
    with pytest.raises(Transient):
        await stream_to(http, served.url("f"), tmp_path / "f", limit=10)
    with pytest.raises(Refused):
        await stream_to(http, served.url("f"), tmp_path / "f", limit=10)


# -- a platform's downloads ------------------------------------------------------------------------------

async def test_a_file_is_fetched_again_after_a_server_error_and_described_by_its_bytes(served, tmp_path):
    served.bodies["chart.png"] = b"not an image at all\n"
    served.failures["chart.png"] = [502]
    downloads = Downloads(tmp_path, backoff=0)
    [fetched] = await downloads.fetch_all([Offered("", "chart.png", served.url("chart.png"), "image/png", 20)],
                                          "slack:T1:dm:D1", "1712.0001")
    a = fetched.attachment
    assert (a.kind, a.file_name, a.mime_type, a.size, a.refused_reason) == (
        "document", "chart.png", "text/plain", 20, None)
    assert a.path == str(tmp_path / "attachments" / "slack_T1_dm_D1" / "1712.0001-chart.png")
    assert served.asked == ["chart.png", "chart.png"] and fetched.notice is None


async def test_a_file_over_the_cap_is_refused_with_one_sentence_for_the_person(served, tmp_path):
    served.bodies["dump"] = b"x" * (300 * 1024)
    served.chunked.add("dump")
    downloads = Downloads(tmp_path, limit_mb=0.125)
    [fetched] = await downloads.fetch_all([Offered("document", "dump", served.url("dump"))], "s", "m")
    assert fetched.notice == "I did not read dump: it is larger than the 0.125 MB limit for files."
    assert fetched.attachment.path is None
    assert fetched.attachment.refused_reason == "larger than the 0.125 MB limit for files"
    assert not any(p.is_file() for p in (tmp_path / "attachments").rglob("*"))


async def test_two_files_of_one_name_in_one_message_are_both_kept(served, tmp_path):
    served.bodies["a"] = b"first"
    served.bodies["b"] = b"second"
    downloads = Downloads(tmp_path)
    fetched = await downloads.fetch_all([Offered("", "notes.txt", served.url("a")),
                                         Offered("", "notes.txt", served.url("b"))], "s", "m")
    paths = [Path(str(f.attachment.path)) for f in fetched]
    assert len(set(paths)) == 2 and [p.read_bytes() for p in paths] == [b"first", b"second"]


async def test_a_file_fetched_whole_before_a_crash_is_found_in_its_place_and_not_fetched_again(served, tmp_path):
    served.bodies["shot"] = png()
    offered = [Offered("", "shot.png", served.url("shot"), "image/png")]
    [first] = await Downloads(tmp_path).fetch_all(offered, "s", "m", found_on_disk=True)
    [again] = await Downloads(tmp_path).fetch_all(offered, "s", "m", found_on_disk=True)  # the replay
    assert served.asked == ["shot"]
    assert again.attachment == first.attachment and again.attachment.kind == "photo"
    assert [p.read_bytes() for p in [Path(str(again.attachment.path))]] == [png()]


async def test_a_file_a_crash_cut_short_is_fetched_again_whole(served, tmp_path):
    served.bodies["notes"] = b"all of it"
    downloads = Downloads(tmp_path)
    place = downloads.destination_of("s", "m", 0, "notes.txt")
    place.parent.mkdir(parents=True)
    (place.parent / ".0123456789abcdef0123456789abcdef.part").write_bytes(b"all")  # what the crash left
    [fetched] = await downloads.fetch_all([Offered("", "notes.txt", served.url("notes"))], "s", "m",
                                          found_on_disk=True)
    assert served.asked == ["notes"] and fetched.attachment.path == str(place)
    assert place.read_bytes() == b"all of it"


async def test_two_files_of_one_name_found_on_disk_each_keep_their_own_place(served, tmp_path):
    served.bodies["a"] = b"first"
    served.bodies["b"] = b"second"
    offered = [Offered("", "notes.txt", served.url("a")), Offered("", "notes.txt", served.url("b"))]
    fetched = await Downloads(tmp_path).fetch_all(offered, "s", "m", found_on_disk=True)
    again = await Downloads(tmp_path).fetch_all(offered, "s", "m", found_on_disk=True)
    paths = [Path(str(f.attachment.path)) for f in again]
    assert [p.read_bytes() for p in paths] == [b"first", b"second"]
    assert [f.attachment for f in again] == [f.attachment for f in fetched] and served.asked == ["a", "b"]


def test_an_offered_file_is_recorded_pending_by_its_url_without_the_token():
    offered = Offered("voice", "../clip.ogg", "https://files.example/clip.ogg", "audio/ogg", 12,
                      headers={"Authorization": "Bearer xoxb-secret"})
    recorded = pending(offered)
    assert recorded == Attachment("voice", "clip.ogg", "audio/ogg", 12, source="https://files.example/clip.ogg")
    assert recorded.pending and "xoxb" not in repr(recorded)


def test_a_claimed_kind_holds_unless_the_bytes_are_no_media_at_all():
    assert settled_kind("voice", "audio/ogg") == "voice"
    assert settled_kind("document", "image/png") == "document"  # a screenshot sent as a file stays one
    assert settled_kind("photo", "text/plain") == "document"
    assert settled_kind("", "image/webp") == "photo"

