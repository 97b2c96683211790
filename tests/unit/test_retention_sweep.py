"""The retention sweep over the attachment folders, on real files whose age is set with `os.utime`."""

from __future__ import annotations

import os
import time
from pathlib import Path

import pytest

from hermes_engine.attachments.documents import Unreadable, read_document
from hermes_engine.attachments.pages import read_part
from hermes_engine.attachments.retention import DAY, PARTIAL_GRACE_SECONDS, is_partial, partial_name, sweep
from hermes_engine.config import BotProfile

NOW = 1_900_000_000.0


def _file(path: Path, age_days: float, text: str = "x") -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)
    os.utime(path, (NOW - age_days * DAY, NOW - age_days * DAY))
    return path


def test_files_older_than_the_retention_go_and_newer_ones_stay(tmp_path):
    root = tmp_path / "attachments"
    old = _file(root / "telegram_1_dm_7" / "10-report.pdf", 31)
    new = _file(root / "telegram_1_dm_7" / "11-chart.png", 29)
    other_old = _file(root / "slack_T1_thread_C1_1.2" / "5-notes.txt", 45)

    swept = sweep(root, NOW, 30 * DAY)

    assert not old.exists() and not other_old.exists()
    assert new.read_text() == "x"
    assert swept.files == 2 and swept.problems == 0


def test_folders_left_empty_are_removed_but_not_the_root(tmp_path):
    root = tmp_path / "attachments"
    _file(root / "discord_9_dm_3" / "nested" / "1-a.txt", 40)
    kept = _file(root / "discord_9_dm_4" / "2-b.txt", 1)

    swept = sweep(root, NOW, 30 * DAY)

    assert not (root / "discord_9_dm_3").exists()
    assert swept.folders == 2  # the conversation's folder and the one inside it
    assert kept.exists() and root.is_dir()
    assert sweep(root, NOW, 30 * DAY).folders == 0 and root.is_dir()  # an empty root stays too


def test_a_linked_folder_is_not_entered_and_what_it_points_at_stays(tmp_path):
    root = tmp_path / "attachments"
    outside = _file(tmp_path / "elsewhere" / "precious.txt", 400)
    (root / "telegram_1_dm_7").mkdir(parents=True)
    (root / "telegram_1_dm_7" / "link").symlink_to(tmp_path / "elsewhere", target_is_directory=True)
    (root / "escape").symlink_to(tmp_path / "elsewhere", target_is_directory=True)

    swept = sweep(root, NOW, 30 * DAY)

    assert outside.read_text() == "x"
    assert (root / "escape").is_symlink() and (root / "telegram_1_dm_7" / "link").is_symlink()
    assert swept.files == 0


def test_a_linked_file_is_left_alone_and_so_is_its_target(tmp_path):
    root = tmp_path / "attachments"
    target = _file(tmp_path / "secret.txt", 400)
    link = root / "telegram_1_dm_7" / "1-secret.txt"
    link.parent.mkdir(parents=True)
    link.symlink_to(target)
    os.utime(link, (NOW - 400 * DAY, NOW - 400 * DAY), follow_symlinks=False)

    assert sweep(root, NOW, 30 * DAY).files == 0
    assert link.is_symlink() and target.exists()


def test_a_root_that_is_a_link_is_not_swept(tmp_path):
    real = tmp_path / "real"
    old = _file(real / "telegram_1_dm_7" / "1-a.txt", 400)
    (tmp_path / "attachments").symlink_to(real, target_is_directory=True)

    assert sweep(tmp_path / "attachments", NOW, 30 * DAY).files == 0
    assert old.exists()


def test_without_a_retention_only_abandoned_temporary_files_of_cut_downloads_go(tmp_path):
    root = tmp_path / "attachments"
    folder = root / "slack_T1_dm_D1"
    kept = _file(folder / "1-old-photo.png", 4000)
    cut = _file(folder / partial_name(), PARTIAL_GRACE_SECONDS * 2 / DAY)
    live = _file(folder / partial_name(), 60 / DAY)  # written to a minute ago: a download in flight
    look_alike = _file(folder / "2-.notes.part", 4000)  # a person's file that happens to end in .part

    swept = sweep(root, NOW, None)

    assert not cut.exists()
    assert kept.exists() and live.exists() and look_alike.exists()
    assert swept.partials == 1 and swept.files == 0


def test_temporary_file_names_are_hidden_and_recognised():
    name = partial_name()
    assert name.startswith(".") and is_partial(name)
    assert not is_partial("1-report.part") and not is_partial(".report.part")


def test_the_profile_keeps_files_thirty_days_unless_set_and_zero_means_forever():
    assert BotProfile(name="b").attachments.retention_days == 30
    assert BotProfile(name="b", attachments={"retention_days": 0}).attachments.retention_days == 0
    with pytest.raises(ValueError):
        BotProfile(name="b", attachments={"retention_days": -1})


def test_a_document_deleted_since_it_was_sent_is_one_sentence_to_the_model(tmp_path):
    gone = tmp_path / "attachments" / "telegram_1_dm_7" / "1-report.txt"
    with pytest.raises(Unreadable) as caught:
        read_document(gone, "text")
    assert str(caught.value).startswith("the file is no longer kept")
    assert "send it again" in str(caught.value) and "\n" not in str(caught.value)
    with pytest.raises(Unreadable, match="no longer kept"):
        read_part(str(gone), "text", 0)


def test_the_sweep_uses_modification_times_not_the_clock_of_the_test(tmp_path):
    root = tmp_path / "attachments"
    fresh = root / "telegram_1_dm_7" / "1-a.txt"
    fresh.parent.mkdir(parents=True)
    fresh.write_text("x")  # modified now
    assert sweep(root, time.time(), 30 * DAY).files == 0
    assert sweep(root, time.time() + 31 * DAY, 30 * DAY).files == 1
