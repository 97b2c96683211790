"""Operator commands on a home without the service's data: one sentence saying so, exit status 2, and nothing
created (an empty home and database there would answer as if they were the service's). The commands run in
this process (`cli_kit.invoke`); the installed console script is run once, as an operator's shell runs it."""

from __future__ import annotations

import asyncio
import os
import subprocess
import sys
from pathlib import Path

import pytest
from cli_kit import ROOT, Ran, invoke
from home_kit import service_home
from postgres import PG_URL, fresh_schema
from sqlalchemy.pool import NullPool

from storage.engine import make_engine

READ_ONLY = [
    ("people",), ("people", "list"), ("kanban", "list"), ("kanban", "show", "1"), ("inbox", "pending"),
    ("inbox", "rejected"), ("pairing", "list"), ("memory", "show", "1"), ("memory", "export", "1"),
    ("skills", "stats"), ("curator", "report"), ("export", "trajectories"), ("security", "list"),
    ("security", "scan", "SKILL"), ("jobs", "list"), ("jobs", "show", "1"),
]
WRITING = [
    ("pairing", "approve", "ABCD2345"), ("pairing", "revoke", "telegram", "42"), ("people", "forget", "1", "--yes"),
    ("kanban", "move", "1", "todo"), ("kanban", "retry", "1"), ("memory", "edit", "1"), ("curator", "run", "--no-llm"),
    ("security", "approve", "0123456789abcdef"), ("security", "revoke", "0123456789abcdef"),
    ("jobs", "pause", "1"), ("jobs", "resume", "1"), ("jobs", "remove", "1", "--yes"), ("jobs", "run", "1"),
    ("dashboard", "link"),
]
EVERY = READ_ONLY + WRITING
NO_DATA = "no data at HERMES_HOME={home} (no hermes.db) — is this the service's home? Run the command as the " \
          "service does: see deploy/README.md."


def command_line(args: tuple[str, ...], home: Path) -> list[str]:
    """The command's words, its "SKILL" a skill file beside the home (outside it)."""
    skill = home.parent / "SKILL.md"
    skill.write_text("---\nname: notes\ndescription: Keep notes.\n---\nWrite them down.\n", encoding="utf-8")
    return [str(skill) if a == "SKILL" else a for a in args]


def run_cli(args: tuple[str, ...], home: Path, **env: str) -> Ran:
    """The command in this process (`cli_kit.invoke`), on `home`, as an operator's shell without the
    service's environment runs it."""
    return invoke(*command_line(args, home), env={"HERMES_DATABASE_URL": None, "HERMES_STATE_BACKEND": None,
                                                  "HERMES_HOME": str(home), "EDITOR": "true", **env})


def one_sentence(result: Ran) -> str:
    assert result.code == 2, (result.out, result.err)
    assert "Traceback" not in result.err
    lines = result.err.strip().splitlines()
    assert len(lines) == 1, result.err
    return lines[0]


@pytest.mark.parametrize("args", EVERY, ids=" ".join)
def test_a_command_on_a_missing_home_says_there_is_no_data_and_creates_nothing(args, tmp_path):
    home = tmp_path / "not-the-service-home"
    assert one_sentence(run_cli(args, home)) == "Error: " + NO_DATA.format(home=home)
    assert not home.exists()


@pytest.mark.parametrize("args", EVERY, ids=" ".join)
def test_a_command_on_an_empty_home_says_there_is_no_data_and_creates_nothing(args, tmp_path):
    home = tmp_path / "empty-home"
    home.mkdir()
    assert one_sentence(run_cli(args, home)) == "Error: " + NO_DATA.format(home=home)
    assert list(home.iterdir()) == []


def test_the_installed_command_on_a_missing_home_says_so_in_one_line_and_creates_nothing(tmp_path):
    """The console script itself, as an operator's shell runs it: the sentence, status 2, no traceback."""
    home = tmp_path / "not-the-service-home"
    environ = {k: v for k, v in os.environ.items() if k not in ("HERMES_DATABASE_URL", "HERMES_STATE_BACKEND")}
    done = subprocess.run([str(Path(sys.executable).with_name("hermes-gateway")), "people", "list"],
                          capture_output=True, text=True, timeout=60, cwd=ROOT, stdin=subprocess.DEVNULL,
                          env={**environ, "HERMES_HOME": str(home)})
    assert one_sentence(Ran(done.returncode, done.stdout, done.stderr)) == "Error: " + NO_DATA.format(home=home)
    assert not home.exists()


@pytest.mark.parametrize("args", [("people", "list"), ("pairing", "approve", "ABCD2345"), ("skills", "stats")],
                         ids=" ".join)
def test_a_home_that_is_a_file_is_named_in_one_sentence(args, tmp_path):
    home = tmp_path / "hermes-home"
    home.write_text("not a folder\n")
    sentence = one_sentence(run_cli(args, home))
    assert sentence.startswith(f"Error: HERMES_HOME={home} is a file, not a folder")
    assert home.read_text() == "not a folder\n"


def test_a_file_that_is_not_a_database_is_named_in_one_sentence_and_kept(tmp_path):
    home = tmp_path / "home"
    home.mkdir()
    (home / "hermes.db").write_bytes(b"not a database, but someone's file " * 10)
    sentence = one_sentence(run_cli(("people", "list"), home))
    assert sentence.startswith("Error: the gateway's database cannot be used (file is not a database)")
    assert (home / "hermes.db").read_bytes() == b"not a database, but someone's file " * 10


@pytest.mark.skipif(os.geteuid() != 0, reason="needs root to run the command as another user")
def test_a_home_the_user_cannot_read_is_named_in_one_sentence(tmp_path):
    home = tmp_path / "service-home"
    service_home(home)
    home.chmod(0o700)  # the service's, as systemd's StateDirectory makes it
    tmp_path.chmod(0o755)
    argv = ["setpriv", "--reuid=65534", "--regid=65534", "--clear-groups", sys.executable, "-m",
            "hermes_gateway.cli.main", "people", "list"]
    done = subprocess.run(argv, capture_output=True, text=True, timeout=60, cwd=ROOT, stdin=subprocess.DEVNULL,
                          env={**os.environ, "HERMES_HOME": str(home)})
    sentence = one_sentence(Ran(done.returncode, done.stdout, done.stderr))
    assert sentence.startswith(f"Error: HERMES_HOME={home} cannot be read by user ")
    assert "(permission denied)" in sentence and "deploy/README.md" in sentence


def test_the_service_home_is_read_and_written_as_before(tmp_path):
    home = tmp_path / "service-home"
    service_home(home)
    listed = run_cli(("people", "list"), home)
    assert listed.code == 0 and listed.out.strip() == "No one is known yet.", listed.err
    approve = run_cli(("pairing", "approve", "ABCD2345"), home)
    assert approve.code == 1 and "No pending request has that code" in approve.err
    scanned = run_cli(("security", "scan", "SKILL"), home)
    assert scanned.code == 0 and scanned.out.strip().endswith("accepted"), scanned.err


@pytest.mark.postgres
@pytest.mark.skipif(not PG_URL, reason="HERMES_TEST_POSTGRES_URL is not set (run .ci/postgres.sh)")
@pytest.mark.parametrize("args", [("people", "list"), ("pairing", "approve", "ABCD2345"), ("export", "trajectories")],
                         ids=" ".join)
async def test_a_postgres_database_without_the_schema_is_no_data_and_stays_empty(args, tmp_path):
    home = tmp_path / "home"
    async with fresh_schema() as schema:
        url = f"{PG_URL}?options=-csearch_path%3D{schema}"
        result = await asyncio.to_thread(run_cli, args, home, HERMES_DATABASE_URL=url)
        assert one_sentence(result) == (
            "Error: no data in the database of HERMES_DATABASE_URL (the database has no tables of the gateway) — "
            "is this the service's database? Run the command as the service does: see deploy/README.md.")
        assert not home.exists()
        assert await _tables_in(schema) == 0


async def _tables_in(schema: str) -> int:
    engine = make_engine(PG_URL or "", poolclass=NullPool)
    try:
        async with engine.connect() as conn:
            return (await conn.exec_driver_sql(
                f"SELECT count(*) FROM information_schema.tables WHERE table_schema = '{schema}'")).scalar_one()
    finally:
        await engine.dispose()
