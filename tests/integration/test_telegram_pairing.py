"""Pairing (platform-neutral; the engine's access gate uses it for every platform): codes, limits, approval
across processes."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
from home_kit import service_home
from postgres import STATE_BACKENDS
from state_backends import pairing_store
from typer.testing import CliRunner

from hermes_engine.policy.pairing import ALPHABET, CODE_LENGTH, JsonPairingStore, Pairing, PairingStore
from hermes_gateway.cli.pairing import app

REPO = Path(__file__).resolve().parents[2]


@pytest.fixture(params=STATE_BACKENDS)
def store(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[PairingStore]:
    """The rules hold on each backend: `pairing.json`, or the database (SQLite, PostgreSQL)."""
    with pairing_store(request.param, tmp_path) as made:
        yield made


class Clock:
    def __init__(self) -> None:
        self.now = 1_000_000.0

    def __call__(self) -> float:
        return self.now


def test_code_is_unambiguous_reused_while_live_and_replies_are_rate_limited(store):
    clock = Clock()
    pairing = Pairing(store, clock=clock)
    first = pairing.request("telegram", "77", "Mallory", chat_id="77")
    assert first.new and len(first.code) == CODE_LENGTH and set(first.code) <= set(ALPHABET)
    assert not set(first.code) & set("01IO")
    second = pairing.request("telegram", "77", "Mallory")
    third = pairing.request("telegram", "77", "Mallory")
    assert second.code == third.code == first.code and not second.new
    assert not pairing.request("telegram", "77", "Mallory").should_reply  # 4th within the hour: silence
    other = pairing.request("telegram", "78", "Trent")
    assert other.code != first.code  # another person is unaffected

    clock.now += 3601  # the code expired and the hour is over
    fresh = pairing.request("telegram", "77", "Mallory")
    assert fresh.new and fresh.code != first.code
    assert pairing.approve(first.code) is None  # expired codes approve nobody


def test_new_codes_per_hour_are_capped_even_when_codes_are_withdrawn(store):
    clock = Clock()
    pairing = Pairing(store, clock=clock, max_codes_per_hour=2)
    codes = []
    for _ in range(3):
        answer = pairing.request("telegram", "77")
        codes.append(answer.code)
        pairing.revoke("telegram", "77")  # withdraws the pending code
    assert codes[0] and codes[1] and codes[2] is None


def test_approve_accepts_any_case_and_separators_then_revoke_withdraws(store):
    pairing = Pairing(store)
    code = pairing.request("discord", "5", "Eve").code
    assert code is not None
    approval = pairing.approve(f"{code[:4].lower()}-{code[4:]}")
    assert approval is not None and approval.user_id == "5" and approval.platform == "discord"
    assert pairing.is_approved("discord", "5") and not pairing.is_approved("telegram", "5")
    assert pairing.pending() == []
    assert pairing.approve(code) is None  # used up
    assert pairing.request("discord", "5").approved
    assert pairing.revoke("discord", "5") and not pairing.is_approved("discord", "5")
    assert not pairing.revoke("discord", "5")


def test_approval_is_announced_once(store):
    pairing = Pairing(store)
    code = pairing.request("telegram", "77", "Mallory", chat_id="77").code
    pairing.approve(code)
    assert [a.user_id for a in pairing.claim_unnotified("telegram")] == ["77"]
    assert pairing.claim_unnotified("telegram") == []


def test_a_fresh_approval_is_announced_by_the_persons_next_message_and_an_older_one_by_the_poll(store):
    clock = Clock()
    pairing = Pairing(store, clock=clock)
    for user in ("77", "78"):
        pairing.approve(pairing.request("telegram", user, chat_id=user).code)
    assert pairing.claim_unnotified("telegram", older_than=5) == []  # too young: a message now is told first
    told = pairing.claim_notice("telegram", "77")
    assert told is not None and told.chat_id == "77"
    assert pairing.claim_notice("telegram", "77") is None  # once
    assert pairing.claim_notice("telegram", "79") is None  # never approved
    clock.now += 5
    assert [a.user_id for a in pairing.claim_unnotified("telegram", older_than=5)] == ["78"]
    assert pairing.claim_notice("telegram", "78") is None and pairing.claim_unnotified("telegram") == []


def test_cli_approves_lists_and_revokes(tmp_path, monkeypatch):
    monkeypatch.setenv("HERMES_HOME", str(service_home(tmp_path)))
    pairing = Pairing.for_home(tmp_path)
    code = pairing.request("telegram", "77", "Mallory").code
    runner = CliRunner()
    listed = runner.invoke(app, ["list"])
    assert listed.exit_code == 0 and code in listed.output and "Mallory" in listed.output
    assert runner.invoke(app, ["approve", "AAAAAAAA"]).exit_code == 1
    approved = runner.invoke(app, ["approve", code])
    assert approved.exit_code == 0 and "77" in approved.output
    assert pairing.is_approved("telegram", "77")
    assert "Pending requests: none" in runner.invoke(app, ["list"]).output
    assert runner.invoke(app, ["revoke", "telegram", "77"]).exit_code == 0
    assert not pairing.is_approved("telegram", "77")
    assert runner.invoke(app, ["revoke", "telegram", "77"]).exit_code == 1


def test_file_store_is_private_atomic_and_shared_between_processes(tmp_path):
    store_path = service_home(tmp_path) / "pairing.json"
    gateway_side = Pairing(JsonPairingStore(store_path))
    code = gateway_side.request("telegram", "77", "Mallory").code
    assert oct(store_path.stat().st_mode & 0o777) == "0o600"

    # Another process (the CLI) approves while this one keeps its cached view: the change is seen.
    assert not gateway_side.is_approved("telegram", "77")
    env = {**os.environ, "HERMES_HOME": str(tmp_path), "PYTHONPATH": str(REPO)}
    subprocess.run([sys.executable, "-m", "hermes_gateway.cli.main", "pairing", "approve", code], env=env, cwd=REPO,
                   check=True, capture_output=True, timeout=60)
    assert gateway_side.is_approved("telegram", "77")

    # Concurrent writers from several processes lose nothing (the fcntl lock serialises read-modify-write).
    script = ("import sys; from pathlib import Path; from hermes_engine.policy.pairing import Pairing\n"
              "p = Pairing.for_home(Path(sys.argv[1]))\n"
              "for i in range(25): p.approve_user('telegram', f'{sys.argv[2]}-{i}')\n")
    procs = [subprocess.Popen([sys.executable, "-c", script, str(tmp_path), f"w{w}"], env=env, cwd=REPO)
             for w in range(4)]
    assert all(p.wait(timeout=60) == 0 for p in procs)
    approved = {a.user_id for a in gateway_side.approved()}
    assert {f"w{w}-{i}" for w in range(4) for i in range(25)} <= approved and "77" in approved
    assert not list(tmp_path.glob("pairing.json.*.tmp"))
    json.loads(store_path.read_text())


def test_damaged_file_denies_instead_of_forgetting(tmp_path):
    (tmp_path / "pairing.json").write_text("{not json")
    pairing = Pairing.for_home(tmp_path)
    with pytest.raises(RuntimeError, match="damaged"):
        pairing.request("telegram", "77")
