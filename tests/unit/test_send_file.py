"""`send_file`'s confinement and limits (the workspace side), and the outbound side's once-per-key upload:
a path outside the workspace, a symlink, a folder or a 3 GB file is refused with a reason before a byte is
read; a type comes from the bytes; an upload cut short by a crash is never repeated."""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from files_kit import png

from adapters.delivery import UPLOADING, Lanes, Outbound
from adapters.outbound import OutboundScheduler
from adapters.part_rendering import PartRenderer
from adapters.parts import Capabilities, InMemoryDeliveryLedger
from adapters.transport import NoTransport
from hermes_engine.errors import PlatformError
from hermes_engine.ports.inbound import ReplyTarget
from hermes_engine.ports.reply import OutgoingFile
from hermes_engine.ports.tools import ToolContext
from hermes_engine.workspace.sending import attached, prepare, send_key
from hermes_engine.workspace.space import Workspace, WorkspaceError

MB = 1024 * 1024
TARGET = ReplyTarget("fake", "acct", "c1", reply_to_id="m1")


class Limits:
    """A `FileOutlet`'s limits: 50 MB, as Telegram's documents."""

    platform = "telegram"

    def max_file_bytes(self, media_type: str) -> int:
        return 50 * MB

    async def send_file(self, target: ReplyTarget, file: OutgoingFile, *, idempotency_key: str) -> bool:
        raise AssertionError("not sent in these tests")


@pytest.fixture
def ws(tmp_path: Path) -> Workspace:
    return Workspace(tmp_path / "ws", 100 * MB).ensure()


def test_a_csv_is_read_with_its_text_type_and_caption(ws):
    (ws.root / "out").mkdir()
    (ws.root / "out" / "report.csv").write_text("a,b\n1,2\n")
    file = prepare(ws, "out/report.csv", "  the numbers ", Limits())
    assert (file.name, file.data, file.media_type, file.caption) == ("report.csv", b"a,b\n1,2\n", "text/csv",
                                                                     "the numbers")
    assert not file.is_image


def test_the_type_comes_from_the_bytes_not_the_name(ws):
    (ws.root / "chart.dat").write_bytes(png())
    (ws.root / "fake.png").write_text("not an image at all")
    assert prepare(ws, "chart.dat", "", Limits()).media_type == "image/png"
    assert prepare(ws, "/workspace/fake.png", "", Limits()).media_type == "text/plain"


@pytest.mark.parametrize("path", ["../outside.txt", "/etc/passwd", "a/../../outside.txt"])
def test_a_path_outside_the_workspace_is_refused(ws, path):
    (ws.root.parent / "outside.txt").write_text("secret")
    with pytest.raises(WorkspaceError, match="outside the workspace"):
        prepare(ws, path, "", Limits())


def test_a_symlinked_file_is_refused_even_when_it_points_inside(ws):
    (ws.root / "real.txt").write_text("x")
    os.symlink(ws.root / "real.txt", ws.root / "link.txt")
    os.symlink("/etc/passwd", ws.root / "passwd")
    with pytest.raises(WorkspaceError, match="symlink"):
        prepare(ws, "link.txt", "", Limits())
    with pytest.raises(WorkspaceError, match="symlink"):
        prepare(ws, "passwd", "", Limits())


def test_a_path_through_a_symlinked_folder_is_refused(ws, tmp_path):
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    (elsewhere / "secret.txt").write_text("secret")
    os.symlink(elsewhere, ws.root / "dir")
    with pytest.raises(WorkspaceError, match="symlink"):
        prepare(ws, "dir/secret.txt", "", Limits())


def test_a_folder_a_fifo_an_empty_file_and_a_missing_one_are_refused(ws):
    (ws.root / "folder").mkdir()
    os.mkfifo(ws.root / "pipe")
    (ws.root / "empty.txt").write_bytes(b"")
    for path, reason in [("folder", "not a regular file"), ("pipe", "not a regular file"),
                         ("empty.txt", "empty"), ("missing.txt", "does not exist"), (".", "not the workspace")]:
        with pytest.raises(WorkspaceError, match=reason):
            prepare(ws, path, "", Limits())


def test_a_3_gb_file_is_refused_by_its_size_before_it_is_read(ws):
    with open(ws.root / "huge.bin", "wb") as handle:
        handle.truncate(3 * 1024 * MB)  # sparse: no disk used
    with pytest.raises(WorkspaceError) as refused:
        prepare(ws, "huge.bin", "", Limits())
    assert str(refused.value) == ("Refused: huge.bin is 3,072 MB, over telegram's limit of 50 MB for a file a bot "
                                  "sends. Make it smaller (compress or split it).")


def test_a_file_exactly_at_the_limit_goes(ws):
    class Tiny(Limits):
        def max_file_bytes(self, media_type: str) -> int:
            return 10

    (ws.root / "ten.txt").write_bytes(b"0123456789")
    (ws.root / "eleven.txt").write_bytes(b"0123456789A")
    assert prepare(ws, "ten.txt", "", Tiny()).size == 10
    with pytest.raises(WorkspaceError, match="over telegram's limit of 10 bytes"):
        prepare(ws, "eleven.txt", "", Tiny())


def test_a_file_the_person_sent_is_reached_by_its_name_the_newest_of_that_name(tmp_path):
    folder = tmp_path / "attachments" / "conversation"
    folder.mkdir(parents=True)
    older, newer = folder / "101-notes.csv", folder / "202-notes.csv"
    older.write_text("old\n")
    newer.write_text("new\n")
    os.utime(older, (1_000, 1_000))
    file = attached(folder, "/attachments/notes.csv", "yours", Limits())
    assert (file.name, file.data, file.caption) == ("notes.csv", b"new\n", "yours")


def test_a_sent_file_that_is_missing_a_symlink_or_a_path_is_refused(tmp_path):
    folder = tmp_path / "attachments" / "conversation"
    folder.mkdir(parents=True)
    os.symlink("/etc/passwd", folder / "101-passwd")
    for path, reason in [("/attachments/passwd", "no file named passwd"), ("/attachments/../x", "Give the name"),
                         ("/attachments/", "Give the name"), ("/attachments/other.csv", "no file named")]:
        with pytest.raises(WorkspaceError, match=reason):
            attached(folder, path, "", Limits())
    with pytest.raises(WorkspaceError, match="no file named"):
        attached(tmp_path / "none", "/attachments/a.csv", "", Limits())


def test_the_key_is_the_same_for_the_same_send_in_a_turn_and_differs_otherwise():
    ctx = ToolContext(bot="b", session_id=7, session_key="k", target=TARGET)
    file = OutgoingFile("a.csv", b"1,2\n", "text/csv", "cap")
    key = send_key(ctx, file)
    assert key == send_key(ctx, OutgoingFile("a.csv", b"1,2\n", "text/csv", "cap"))
    assert key != send_key(ctx, OutgoingFile("a.csv", b"1,3\n", "text/csv", "cap"))
    assert key != send_key(ctx, OutgoingFile("a.csv", b"1,2\n", "text/csv", "other"))
    later = ToolContext(bot="b", session_id=7, session_key="k", target=ReplyTarget("fake", "acct", "c1",
                                                                                  reply_to_id="m2"))
    assert key != send_key(later, file)


# -- the outbound side ----------------------------------------------------------------------------------

class Uploads:
    """A `FileTransport` that counts uploads and fails as told."""

    def __init__(self) -> None:
        self.sent: list[str] = []
        self.failures: list[Exception] = []

    def max_file_bytes(self, media_type: str) -> int:
        return MB

    async def send_file(self, target: ReplyTarget, file: OutgoingFile) -> str:
        if self.failures:
            raise self.failures.pop(0)
        self.sent.append(file.name)
        return f"f{len(self.sent)}"


def outbound(files: Uploads, ledger: InMemoryDeliveryLedger) -> Outbound:
    caps = Capabilities(max_message_length=4000, edit_interval_seconds=0.0)
    return Outbound(NoTransport(), PartRenderer(lambda text: text, caps, platform="fake"),
                    OutboundScheduler(0.0, backoff=0.01, max_backoff=0.02), ledger, lanes=Lanes(0.0), files=files)


FILE = OutgoingFile("a.csv", b"1,2\n", "text/csv")


async def test_a_file_is_uploaded_once_per_key_and_recorded_final():
    files, ledger = Uploads(), InMemoryDeliveryLedger()
    out = outbound(files, ledger)
    assert await out.send_file(TARGET, FILE, idempotency_key="k")
    assert not await out.send_file(TARGET, FILE, idempotency_key="k")
    assert files.sent == ["a.csv"]
    delivery = await ledger.get("k")
    assert delivery is not None and delivery.final and delivery.message_ids == ("f1",)
    await out.scheduler.stop()


async def test_an_upload_a_crash_cut_short_is_not_repeated():
    files, ledger = Uploads(), InMemoryDeliveryLedger()
    await ledger.record("k", [UPLOADING], final=False)  # what a process killed mid-upload leaves
    out = outbound(files, ledger)
    assert not await out.send_file(TARGET, FILE, idempotency_key="k")
    assert files.sent == []
    delivery = await ledger.get("k")
    assert delivery is not None and delivery.final
    await out.scheduler.stop()


async def test_an_upload_the_platform_refused_may_be_tried_again():
    files, ledger = Uploads(), InMemoryDeliveryLedger()
    files.failures.append(PlatformError("file type not allowed"))
    out = outbound(files, ledger)
    with pytest.raises(PlatformError):
        await out.send_file(TARGET, FILE, idempotency_key="k")
    assert await out.send_file(TARGET, FILE, idempotency_key="k")
    assert files.sent == ["a.csv"]
    await out.scheduler.stop()


async def test_a_rate_limited_upload_waits_and_goes_once():
    files, ledger = Uploads(), InMemoryDeliveryLedger()
    files.failures.append(PlatformError("slow down", retry_after=0.05))
    out = outbound(files, ledger)
    assert await out.send_file(TARGET, FILE, idempotency_key="k")
    assert files.sent == ["a.csv"]
    await out.scheduler.stop()


def test_read_file_reads_a_file_the_person_sent_as_attachments_and_nothing_outside_it(tmp_path):
    from hermes_engine.config import WorkspaceSettings
    from hermes_engine.ports.tools import ToolContext
    from hermes_engine.workspace.feature import WorkspaceFeature

    sent = tmp_path / "attachments" / "telegram_1_dm_42"
    sent.mkdir(parents=True)
    (sent / "7-notes.txt").write_text("first\nsecond\n")
    os.symlink("/etc/passwd", sent / "8-passwd")
    feature = WorkspaceFeature(tmp_path, "helper", WorkspaceSettings(), admins=[],
                               attachments=lambda key: tmp_path / "attachments" / key.replace(":", "_"))
    ctx = ToolContext(bot="helper", session_id=1, session_key="telegram:1:dm:42", person_id=1, user_id="42",
                      is_admin=True)
    read = feature.read_file(ctx, "/attachments/notes.txt")
    assert not read.is_error and read.content.splitlines() == ["1| first", "2| second"]
    for path, reason in [("/attachments/passwd", "no file named passwd"), ("/attachments/../../etc/passwd",
                                                                            "Give the name")]:
        refused = feature.read_file(ctx, path)
        assert refused.is_error and reason in refused.content
