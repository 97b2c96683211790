"""SqlStore against real databases: a SQLite file per test, and PostgreSQL when HERMES_TEST_POSTGRES_URL is set.

    eval "$(.ci/postgres.sh)"     # starts a local server and exports HERMES_TEST_POSTGRES_URL
    pytest tests/unit/test_storage.py -q

Each PostgreSQL test runs in a schema of its own (created, selected through `search_path`, dropped after),
so runs sharing one server do not disturb each other.
"""

from __future__ import annotations

import asyncio
import warnings
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
import sqlalchemy as sa
from alembic.autogenerate import compare_metadata
from alembic.runtime.migration import MigrationContext
from postgres import BACKENDS, PG_URL, fresh_schema
from sqlalchemy.exc import IntegrityError
from sqlalchemy.ext.asyncio import AsyncEngine
from sqlalchemy.pool import NullPool

from hermes_engine.ports.conversation import ImagePart, Message, ToolCall, Usage
from hermes_engine.ports.reply import Delivery
from hermes_engine.ports.storage import GoalRecord, Store
from storage import migrate
from storage.engine import make_engine, normalize_url
from storage.models import Base
from storage.store import SqlStore

TABLES = {"people", "accounts", "sessions", "messages", "inbound_events", "goals", "leases", "alembic_version"}


class FakeClock:
    def __init__(self) -> None:
        self.now = datetime(2025, 1, 1, 12, 0, tzinfo=UTC)

    def __call__(self) -> datetime:
        return self.now

    def advance(self, seconds: float) -> None:
        self.now += timedelta(seconds=seconds)


@dataclass
class Database:
    """Where a test's data lives: a fresh SQLite file, or a fresh PostgreSQL schema (via `search_path`),
    so tests, and test runs sharing one server, never see each other's tables."""

    url: str
    engine_options: dict[str, Any] = field(default_factory=dict)

    def store(self, **kwargs: Any) -> SqlStore:
        return SqlStore(self.url, engine_options=self.engine_options, **kwargs)

    def engine(self, url: str | None = None) -> AsyncEngine:
        return make_engine(url or self.url, poolclass=NullPool, **self.engine_options)


@pytest.fixture(params=BACKENDS)
async def db(request: pytest.FixtureRequest, tmp_path):
    if request.param == "sqlite":
        yield Database(f"sqlite+aiosqlite:///{tmp_path / 'data' / 'hermes.db'}")
        return
    assert PG_URL
    async with fresh_schema() as schema:
        yield Database(PG_URL, {"connect_args": {"server_settings": {"search_path": schema}}})


@pytest.fixture
def clock() -> FakeClock:
    return FakeClock()


@pytest.fixture
async def store(db: Database, clock: FakeClock):
    s = db.store(clock=clock)
    await s.init()
    try:
        yield s
    finally:
        await s.close()


async def _open_connections(store: SqlStore, n: int = 10) -> None:
    """Fill the pool first, so the concurrent calls that follow really overlap (a cold SQLite pool opens
    its connections one by one, which would serialize them)."""
    await asyncio.gather(*(store.get_person(0) for _ in range(n)))


def _table_names(conn: sa.Connection) -> set[str]:
    return set(sa.inspect(conn).get_table_names())


# ------------------------------------------------------------------------------ URLs and engine setup

@pytest.mark.parametrize(("given", "expected"), [
    ("sqlite:////var/lib/hermes.db", "sqlite+aiosqlite:////var/lib/hermes.db"),
    ("sqlite+aiosqlite:///rel/hermes.db", "sqlite+aiosqlite:///rel/hermes.db"),
    ("postgresql://u:p@127.0.0.1:5432/db", "postgresql+asyncpg://u:p@127.0.0.1:5432/db"),
    ("postgres://u:p@db.example/db", "postgresql+asyncpg://u:p@db.example/db"),
    ("postgresql+psycopg2://u:p@h/db", "postgresql+asyncpg://u:p@h/db"),
    ("postgresql+asyncpg://u:p@h/db", "postgresql+asyncpg://u:p@h/db"),
    ("postgres://u:p@h/db?sslmode=require", "postgresql+asyncpg://u:p@h/db?ssl=require"),
])
def test_plain_and_sync_urls_are_upgraded_to_async_drivers(given: str, expected: str) -> None:
    assert normalize_url(given).render_as_string(hide_password=False) == expected


def test_store_satisfies_the_store_protocol_and_rejects_other_databases() -> None:
    missing = [name for name in dir(Store) if not name.startswith("_") and not hasattr(SqlStore, name)]
    assert missing == []
    with pytest.raises(ValueError, match="unsupported database"):
        SqlStore("mysql://u:p@h/db")


async def test_using_the_store_before_init_is_a_clear_error(tmp_path) -> None:
    s = SqlStore(f"sqlite:///{tmp_path / 'x.db'}")
    with pytest.raises(RuntimeError, match="init"):
        await s.active_session("k", "bot")


async def test_sqlite_file_gets_its_directory_wal_foreign_keys_and_busy_timeout(tmp_path) -> None:
    path = tmp_path / "deep" / "er" / "hermes.db"
    async with SqlStore(f"sqlite:///{path}") as s:  # plain sqlite:// URL works
        assert path.exists()
        async with s.engine.connect() as conn:
            assert (await conn.exec_driver_sql("PRAGMA journal_mode")).scalar() == "wal"
            assert (await conn.exec_driver_sql("PRAGMA foreign_keys")).scalar() == 1
            assert (await conn.exec_driver_sql("PRAGMA busy_timeout")).scalar() >= 1000


@pytest.mark.postgres
@pytest.mark.skipif(not PG_URL, reason="HERMES_TEST_POSTGRES_URL is not set (run .ci/postgres.sh)")
async def test_a_postgres_url_with_libpq_options_keeps_the_tables_in_that_schema() -> None:
    assert PG_URL
    async with fresh_schema() as schema:
        store = SqlStore(f"{PG_URL}?options=-c%20search_path%3D{schema}")
        await store.init()
        await store.close()
        engine = make_engine(PG_URL, poolclass=NullPool)
        try:
            async with engine.connect() as conn:
                tables = set((await conn.execute(sa.text(
                    "SELECT table_name FROM information_schema.tables WHERE table_schema = :s"),
                    {"s": schema})).scalars())
        finally:
            await engine.dispose()
        assert {"sessions", "kanban_cards", "alembic_version"} <= tables


async def test_in_memory_sqlite_works_for_quick_use() -> None:
    async with SqlStore("sqlite://") as s:
        session = await s.active_session("k", "bot")
        await s.append_message(session.id, Message(role="user", content="hi"))
        assert [m.content for m in await s.load_messages(session.id)] == ["hi"]


# --------------------------------------------------------------------------------------- migrations

async def test_init_applies_migrations_and_a_second_init_is_a_no_op(db: Database) -> None:
    first = db.store()
    await first.init()
    await first.init()  # same instance: nothing happens
    async with first.engine.connect() as conn:
        assert await conn.run_sync(_table_names) >= TABLES
    head = migrate.head_revision()
    assert head is not None and head >= "0001"
    assert await migrate.current_revision(first.engine) == head
    session = await first.active_session("k", "bot")
    await first.close()

    async with db.store() as second:  # a restart: migrations already at head, data kept
        assert (await second.active_session("k", "bot")).id == session.id
        assert await migrate.current_revision(second.engine) == head


async def test_replicas_starting_together_migrate_once(db: Database) -> None:
    stores = [db.store() for _ in range(3)]
    try:
        await asyncio.gather(*(s.init() for s in stores))
        assert await migrate.current_revision(stores[0].engine) == migrate.head_revision()
    finally:
        for s in stores:
            await s.close()


async def test_models_match_the_migrations(db: Database) -> None:
    async with db.store() as s:
        async with s.engine.connect() as conn:
            with warnings.catch_warnings():
                warnings.filterwarnings("ignore", message=".*expression-based index.*")
                diff = await conn.run_sync(lambda c: compare_metadata(
                    MigrationContext.configure(c, opts={"compare_type": True, "include_object": migrate.include_object}),
                    Base.metadata))
    assert diff == []


async def test_upgrade_for_the_cli_takes_a_plain_url_or_an_engine(db: Database) -> None:
    plain = db.url.replace("+aiosqlite", "").replace("+asyncpg", "")
    if db.engine_options:  # the test's schema is set on the engine
        engine = db.engine(plain)
        try:
            await migrate.upgrade(engine)
            await migrate.upgrade(engine)
            assert await migrate.current_revision(engine) == migrate.head_revision()
        finally:
            await engine.dispose()
    else:
        await migrate.upgrade(plain)
        await migrate.upgrade(plain)
        assert await migrate.current_revision(plain) == migrate.head_revision()


# ----------------------------------------------------------------------------------------- messages

async def test_messages_round_trip_in_insertion_order(store: SqlStore) -> None:
    session = await store.active_session("telegram:dm:1", "bot")
    big = "x" * 60_000 + "ünïcødé ✓ 🎉" + "y" * 60_000
    messages = [
        Message(role="user", content="look at this", images=(ImagePart("image/png", "iVBORw0KGgo="),),
                meta={"platform_message_id": "42"}),
        Message(role="assistant", content="", tool_calls=(
            ToolCall(id="call_1", name="read_file", arguments='{"path": "a.txt"}'),
            ToolCall(id="call_2", name="broken", arguments='{"unterminated": '),
        )),
        Message(role="tool", content=big, tool_call_id="call_1", tool_name="read_file"),
        Message(role="tool", content="boom", tool_call_id="call_2", tool_name="broken", is_error=True),
        Message(role="assistant", content="done"),
    ]
    for m in messages:
        await store.append_message(session.id, m)

    loaded = await store.load_messages(session.id)
    assert loaded == messages
    assert len(loaded[2].content) == len(big)
    assert loaded[0].meta == {"platform_message_id": "42"}


async def test_stored_messages_carry_usage_person_model_and_sum_to_session_usage(store: SqlStore) -> None:
    account = await store.resolve_account("slack", "T1", "U1", "Ann")
    session = await store.active_session("k", "bot")
    user_id = await store.append_message(session.id, Message(role="user", content="hi"),
                                         person_id=account.person_id)
    await store.append_message(session.id, Message(role="assistant", content="a"),
                               usage=Usage(10, 5, 100, 7), model="anthropic:claude")
    await store.append_message(session.id, Message(role="assistant", content="b"), usage=Usage(1, 2, 0, 0))
    other = await store.new_session("k2", "bot")
    await store.append_message(other.id, Message(role="assistant", content="c"), usage=Usage(1000, 1000))

    stored = await store.load_stored_messages(session.id)
    assert [s.id for s in stored][0] == user_id
    assert stored[0].person_id == account.person_id and stored[0].usage is None
    assert stored[1].usage == Usage(10, 5, 100, 7) and stored[1].model == "anthropic:claude"
    assert stored[1].created_at.tzinfo is not None
    assert await store.session_usage(session.id) == Usage(11, 7, 100, 7)
    assert await store.session_usage(999_999) == Usage()


async def test_text_postgres_cannot_hold_reads_back_the_same_on_every_backend(store: SqlStore) -> None:
    session = await store.active_session("k", "bot")
    await store.append_message(session.id, Message(role="tool", content="bin\x00ary \ud800",
                                                   tool_call_id="c", tool_name="t", meta={"k": "a\x00b"}))
    [loaded] = await store.load_messages(session.id)
    assert loaded.content == "bin\ufffdary \ufffd"
    assert loaded.meta == {"k": "a\ufffdb"}


async def test_a_message_for_an_unknown_session_is_rejected(store: SqlStore) -> None:
    with pytest.raises(IntegrityError):
        await store.append_message(123_456, Message(role="user", content="orphan"))


# ------------------------------------------------------------------------------------------ inbound

async def test_record_inbound_reports_duplicates(store: SqlStore) -> None:
    assert await store.record_inbound("slack", "Ev1", {"text": "hi", "at": datetime(2025, 1, 1)}) is True
    assert await store.record_inbound("slack", "Ev1", {"text": "retry"}) is False
    assert await store.record_inbound("telegram", "Ev1", {}) is True  # ids are per platform
    [first, _] = await store.pending_inbound()
    assert first.payload == {"text": "hi", "at": "2025-01-01 00:00:00"}  # non-JSON values kept as text


async def test_twenty_concurrent_deliveries_of_one_event_have_exactly_one_winner(store: SqlStore) -> None:
    await _open_connections(store)
    results = await asyncio.gather(*(store.record_inbound("slack", "Ev-race", {"n": i}) for i in range(20)))
    assert sorted(results) == [False] * 19 + [True]
    assert len(await store.pending_inbound("slack")) == 1


async def test_pending_inbound_lists_received_but_not_completed_events(store: SqlStore, clock) -> None:
    for event_id in ("1", "2", "3"):
        await store.record_inbound("telegram", event_id, {"update_id": event_id})
        clock.advance(1)
    await store.record_inbound("discord", "9", {})
    await store.complete_inbound("telegram", "2")

    pending = await store.pending_inbound("telegram")
    assert [(e.event_id, e.status) for e in pending] == [("1", "received"), ("3", "received")]
    assert pending[0].payload == {"update_id": "1"}
    assert {e.platform for e in await store.pending_inbound()} == {"telegram", "discord"}

    # Completed events can be pruned; pending ones never are.
    assert await store.prune_inbound(clock.now + timedelta(days=1)) == 1
    assert await store.record_inbound("telegram", "2", {}) is True
    assert len(await store.pending_inbound("telegram")) == 3


async def test_a_rejected_event_is_kept_once_never_pending_and_pruned_with_the_answered(store: SqlStore, clock) -> None:
    await store.record_rejected("telegram", "1:rejected:7", {"reason": "no chat", "raw": "broken \ud800 \x00"})
    await store.record_rejected("telegram", "1:rejected:7", {"reason": "sent again"})  # a resend changes nothing
    clock.advance(1)
    await store.record_rejected("telegram", "1:rejected:8", {"reason": "no integer update_id"})
    assert await store.pending_inbound() == []
    kept = await store.rejected_inbound("telegram")
    assert [(e.event_id, e.status, e.payload["reason"]) for e in kept] == [
        ("1:rejected:8", "rejected", "no integer update_id"), ("1:rejected:7", "rejected", "no chat")]
    assert kept[1].payload["raw"] == "broken \ufffd \ufffd"  # stored on every backend
    assert await store.rejected_inbound("slack") == []
    assert await store.record_inbound("telegram", "1:rejected:7", {}) is False  # its key is taken: never a turn
    assert await store.prune_inbound(clock.now + timedelta(days=1)) == 2
    assert await store.rejected_inbound() == []


async def test_a_session_reads_its_own_pending_events_and_those_recorded_without_a_session(store: SqlStore) -> None:
    await store.record_inbound("telegram", "a1", {}, session_key="a")
    await store.record_inbound("telegram", "old", {})  # recorded before events named their session
    await store.record_inbound("telegram", "b1", {}, session_key="b")
    await store.record_inbound("telegram", "a2", {}, session_key="a")
    await store.complete_inbound("telegram", "a2")

    assert [e.event_id for e in await store.pending_inbound(session_key="a")] == ["a1", "old"]
    assert [e.session_key for e in await store.pending_inbound(session_key="b")] == [None, "b"]
    assert len(await store.pending_inbound()) == 3


async def test_the_last_message_recorded_per_conversation_is_read_for_one_account_and_recent_ones_only(
        store: SqlStore, clock) -> None:
    async def record(event_id: str, chat: str, message_id: str, *, thread: str | None = None, account: str = "bot",
                     platform: str = "discord", synthetic: bool = False) -> None:
        message = {"account": account, "chat_id": chat, "thread_id": thread, "message_id": message_id,
                   "synthetic": synthetic}
        await store.record_inbound(platform, event_id, {"bot": "b", "message": message, "purpose": "turn"})
        clock.advance(1)

    await record("stale", "c9", "90")  # a conversation quiet since before `since`
    clock.advance(3600)
    since = clock.now
    await record("e1", "c1", "100")
    await record("e2", "c1", "105", thread="105")  # the thread opened on message 105
    await record("e3", "c1", "120", thread="105")
    await record("e4", "c1", "110")
    await record("e5", "c1", "goal-1-1", synthetic=True)  # an engine-made continuation: not a person's message
    await record("e6", "dm7", "130")
    await record("e7", "c1", "140", account="other-bot")
    await record("e8", "c1", "150", platform="telegram")
    await store.complete_inbound("discord", "e6")  # answered or not, it was received
    await store.record_rejected("discord", "bot:rejected:x", {"reason": "no author", "raw": "{}"})

    marks = await store.last_inbound("discord", "bot", since=since, limit=10)
    assert [(m.chat_id, m.thread_id, m.message_id) for m in marks] == [
        ("dm7", None, "130"), ("c1", None, "110"), ("c1", "105", "120")]  # most recently written in first
    assert marks[0].recorded_at == since + timedelta(seconds=5)
    assert [m.message_id for m in await store.last_inbound("discord", "bot", since=since, limit=2)] == ["130", "110"]
    assert await store.last_inbound("discord", "bot", since=clock.now, limit=10) == []


# ------------------------------------------------------------------------------- people and accounts

async def test_resolve_account_creates_once_and_keeps_the_display_name_fresh(store: SqlStore) -> None:
    first = await store.resolve_account("telegram", "bot1", "42", "Ann")
    again = await store.resolve_account("telegram", "bot1", "42", "Ann B.")
    assert again.id == first.id and again.person_id == first.person_id
    assert again.display_name == "Ann B."
    assert (await store.resolve_account("telegram", "bot1", "42")).display_name == "Ann B."
    other_bot = await store.resolve_account("telegram", "bot2", "42", "Ann")
    assert other_bot.person_id != first.person_id  # linking is explicit
    person = await store.get_person(first.person_id)
    assert person is not None and person.display_name == "Ann"
    assert await store.get_person(987_654) is None


async def test_concurrent_first_contact_from_one_user_yields_one_person(store: SqlStore) -> None:
    await _open_connections(store)
    results = await asyncio.gather(*(store.resolve_account("slack", "T1", "U1", "Bo") for _ in range(10)))
    assert len({r.id for r in results}) == 1
    assert len({r.person_id for r in results}) == 1
    async with store.engine.connect() as conn:
        assert (await conn.execute(sa.text("SELECT count(*) FROM people"))).scalar() == 1


async def test_link_accounts_moves_accounts_and_marks_the_merged_person(store: SqlStore) -> None:
    tg = await store.resolve_account("telegram", "bot", "1", "Ann")
    sl = await store.resolve_account("slack", "T1", "U1", "ann")
    earlier = await store.resolve_account("discord", "G1", "D1", "ann#1")
    await store.link_accounts(sl.person_id, earlier.person_id)  # discord person merged into slack person
    session = await store.active_session("k", "bot")
    await store.append_message(session.id, Message(role="user", content="hi"), person_id=sl.person_id)

    await store.link_accounts(tg.person_id, sl.person_id)

    accounts = await store.list_accounts(tg.person_id)
    assert {(a.platform, a.user_id) for a in accounts} == {("telegram", "1"), ("slack", "U1"), ("discord", "D1")}
    assert (await store.resolve_account("slack", "T1", "U1")).person_id == tg.person_id
    assert (await store.get_person(sl.person_id)).merged_into == tg.person_id
    assert (await store.get_person(earlier.person_id)).merged_into == tg.person_id  # chains are flattened
    assert (await store.get_person(tg.person_id)).merged_into is None
    assert (await store.load_stored_messages(session.id))[0].person_id == tg.person_id
    assert await store.list_accounts(sl.person_id) == []

    await store.link_accounts(tg.person_id, tg.person_id)  # no-op
    with pytest.raises(ValueError, match="merged into"):
        await store.link_accounts(sl.person_id, tg.person_id)
    with pytest.raises(ValueError, match="no person"):
        await store.link_accounts(tg.person_id, 999_999)


# ----------------------------------------------------------------------------------------- sessions

async def test_active_session_creates_one_session_and_then_returns_the_newest(store: SqlStore) -> None:
    await _open_connections(store)
    created = await asyncio.gather(*(store.active_session("chat:1", "bot") for _ in range(10)))
    assert len({s.id for s in created}) == 1
    first = created[0]
    assert first.parent_id is None and first.model is None and first.state == {}
    assert first.created_at.tzinfo is not None

    newer = await store.new_session("chat:1", "bot", parent_id=first.id)
    assert newer.parent_id == first.id
    assert (await store.active_session("chat:1", "bot")).id == newer.id
    assert (await store.active_session("chat:1", "other-bot")).id not in (first.id, newer.id)
    assert (await store.get_session(first.id)) == first


async def test_update_session_sets_model_and_replaces_state(store: SqlStore) -> None:
    session = await store.active_session("k", "bot")
    await store.update_session(session.id, model="openai:gpt-4o", state={"turns": 3, "nested": {"a": [1]}})
    updated = await store.active_session("k", "bot")
    assert updated.model == "openai:gpt-4o" and updated.state == {"turns": 3, "nested": {"a": [1]}}

    await store.update_session(session.id, state={"turns": 4})  # model left alone
    assert (await store.get_session(session.id)).model == "openai:gpt-4o"
    await store.update_session(session.id, model=None)  # clears the override, state left alone
    cleared = await store.get_session(session.id)
    assert cleared.model is None and cleared.state == {"turns": 4}
    with pytest.raises(LookupError):
        await store.update_session(999_999, model="x")


# -------------------------------------------------------------------------------------------- goals

async def test_goal_lifecycle_create_progress_pause_and_finish(store: SqlStore, clock) -> None:
    session = await store.active_session("chat:1", "bot")
    assert await store.active_goal("chat:1", "bot") is None
    goal = await store.create_goal("chat:1", "bot", "ship the release", session_id=session.id,
                                   target={"platform": "telegram", "chat_id": "1"})
    assert isinstance(goal, GoalRecord)
    assert (goal.status, goal.turns_used, goal.tokens_used, goal.verdicts) == ("active", 0, 0, [])
    assert goal.target == {"platform": "telegram", "chat_id": "1"}

    clock.advance(5)
    await store.update_goal(goal.id, add_turns=1, add_tokens=1200, verdict={"verdict": "continue"})
    updated = await store.update_goal(goal.id, add_turns=1, add_tokens=800, verdict={"verdict": "continue"})
    assert updated is not None
    assert (updated.turns_used, updated.tokens_used) == (2, 2000)
    assert [v["verdict"] for v in updated.verdicts] == ["continue", "continue"]
    assert updated.updated_at > goal.updated_at and updated.created_at == goal.created_at

    paused = await store.update_goal(goal.id, status="paused")
    assert (await store.active_goal("chat:1", "bot")) == paused  # paused is still the open goal
    await store.update_goal(goal.id, status="active")
    done = await store.update_goal(goal.id, status="done", verdict={"verdict": "done"})
    assert done.status == "done" and len(done.verdicts) == 3
    assert await store.active_goal("chat:1", "bot") is None
    assert await store.get_goal(goal.id) == done
    assert await store.update_goal(999_999, status="done") is None
    with pytest.raises(ValueError, match="unknown goal status"):
        await store.update_goal(goal.id, status="finished")


async def test_a_new_goal_clears_the_open_one_and_goals_are_listed_by_status(store: SqlStore) -> None:
    old = await store.create_goal("chat:1", "bot", "old aim")
    new = await store.create_goal("chat:1", "bot", "new aim")
    elsewhere = await store.create_goal("chat:2", "bot", "other chat")
    assert (await store.get_goal(old.id)).status == "cleared"
    assert (await store.active_goal("chat:1", "bot")).id == new.id

    assert [g.id for g in await store.list_goals("active")] == [new.id, elsewhere.id]
    assert [g.id for g in await store.list_goals("cleared")] == [old.id]
    assert [g.id for g in await store.list_goals(session_key="chat:1")] == [old.id, new.id]
    assert [g.id for g in await store.list_goals(bot="nobody")] == []
    with pytest.raises(ValueError, match="another goal is open"):
        await store.update_goal(old.id, status="active")


async def test_concurrent_new_goals_leave_exactly_one_open(store: SqlStore) -> None:
    await _open_connections(store)
    await asyncio.gather(*(store.create_goal("chat:1", "bot", f"aim {i}") for i in range(5)))
    goals = await store.list_goals(session_key="chat:1")
    assert len(goals) == 5
    assert [g.status for g in goals].count("active") == 1


# ------------------------------------------------------------------------------------------- leases

async def test_a_lease_is_exclusive_until_it_expires(store: SqlStore, clock) -> None:
    assert await store.acquire_lease("curator", "replica-a", ttl_seconds=60) is True
    assert await store.acquire_lease("curator", "replica-b", ttl_seconds=60) is False
    assert await store.acquire_lease("kanban", "replica-b", ttl_seconds=60) is True  # other name

    clock.advance(59)
    assert await store.acquire_lease("curator", "replica-a", ttl_seconds=60) is True  # renewal extends
    clock.advance(59)
    assert await store.acquire_lease("curator", "replica-b", ttl_seconds=60) is False
    clock.advance(2)  # past the renewed expiry
    assert await store.acquire_lease("curator", "replica-b", ttl_seconds=60) is True
    assert await store.acquire_lease("curator", "replica-a", ttl_seconds=60) is False


async def test_releasing_a_lease_frees_it_only_for_its_holder(store: SqlStore) -> None:
    assert await store.acquire_lease("job", "a", ttl_seconds=600)
    assert await store.release_lease("job", "b") is False
    assert await store.acquire_lease("job", "b", ttl_seconds=600) is False
    assert await store.release_lease("job", "a") is True
    assert await store.acquire_lease("job", "b", ttl_seconds=600) is True
    with pytest.raises(ValueError):
        await store.acquire_lease("job", "b", ttl_seconds=0)


async def test_a_renewal_holds_only_a_lease_held_without_a_break(store: SqlStore, clock) -> None:
    assert await store.acquire_lease("turn", "a", ttl_seconds=10)
    assert await store.renew_lease("turn", "a", ttl_seconds=10) is True
    clock.advance(11)  # expired, but nobody took it: still a's to renew
    assert await store.renew_lease("turn", "a", ttl_seconds=10) is True
    assert await store.acquire_lease("turn", "b", ttl_seconds=10) is False
    assert await store.renew_lease("turn", "b", ttl_seconds=10) is False  # never held: a renewal takes nothing

    clock.advance(11)
    assert await store.acquire_lease("turn", "b", ttl_seconds=10)  # taken over
    assert await store.renew_lease("turn", "a", ttl_seconds=10) is False
    assert await store.release_lease("turn", "b")  # b's work is done and given back
    assert await store.renew_lease("turn", "a", ttl_seconds=10) is False  # free now, but not a's any more
    with pytest.raises(ValueError):
        await store.renew_lease("turn", "a", ttl_seconds=0)


async def test_concurrent_lease_attempts_have_exactly_one_winner(store: SqlStore) -> None:
    await _open_connections(store)
    results = await asyncio.gather(*(store.acquire_lease("tick", f"replica-{i}", 30) for i in range(10)))
    assert results.count(True) == 1


# ------------------------------------------------------------------------------------- cancellation

async def test_a_cancelled_caller_does_not_cut_a_write_in_half(store: SqlStore) -> None:
    session = await store.active_session("k", "bot")
    async with store.engine.connect() as blocker:  # another writer holds the lock the append needs
        if store.dialect == "sqlite":
            await blocker.exec_driver_sql("BEGIN IMMEDIATE")
        else:
            await blocker.exec_driver_sql("LOCK TABLE messages IN EXCLUSIVE MODE")
        caller = asyncio.create_task(store.append_message(session.id, Message(role="user", content="kept")))
        await asyncio.sleep(0.2)  # the append is now waiting inside the database
        caller.cancel()  # a /stop during the turn
        with pytest.raises(asyncio.CancelledError):
            await caller
        await blocker.rollback()

    for _ in range(200):  # the call still ran to completion, as a whole
        if await store.load_messages(session.id):
            break
        await asyncio.sleep(0.01)
    assert [m.content for m in await store.load_messages(session.id)] == ["kept"]
    assert await store.acquire_lease("after", "me", 10)  # and the store is not wedged


# ------------------------------------------------------------------------------------ delivery log

async def test_a_delivery_is_recorded_per_bot_and_platform_and_stays_final(store: SqlStore, clock: FakeClock) -> None:
    assert await store.get_delivery("bot1", "telegram", "e1:reply") is None
    await store.record_delivery("bot1", "telegram", "e1:reply", ["11"], final=False)
    await store.record_delivery("bot1", "telegram", "e1:reply", ["11", "12"], final=False)
    assert await store.get_delivery("bot1", "telegram", "e1:reply") == Delivery(("11", "12"), False)
    assert await store.get_delivery("bot2", "telegram", "e1:reply") is None
    assert await store.get_delivery("bot1", "slack", "e1:reply") is None

    await store.record_delivery("bot1", "telegram", "e1:reply", ["11", "12"], final=True)
    await store.record_delivery("bot1", "telegram", "e1:reply", ["99"], final=False)  # a late interim write
    assert await store.get_delivery("bot1", "telegram", "e1:reply") == Delivery(("11", "12"), True)

    clock.advance(3600)
    await store.record_delivery("bot1", "telegram", "e2:reply", ["13"], final=True)
    assert await store.prune_deliveries(clock.now - timedelta(seconds=60)) == 1
    assert await store.get_delivery("bot1", "telegram", "e1:reply") is None
    assert await store.get_delivery("bot1", "telegram", "e2:reply") == Delivery(("13",), True)


# ----------------------------------------------------------------------------------------- forgetting a person

async def _says(store: SqlStore, session_id: int, person_id: int | None, text: str) -> None:
    await store.append_message(session_id, Message(role="user", content=text), person_id=person_id)
    await store.append_message(session_id, Message(role="assistant", content="noted"))


def _payload(account: str, user_id: str, text: str, attachments: list[dict[str, Any]] | None = None) -> dict[str, Any]:
    message = {"platform": "telegram", "account": account, "chat_kind": "dm", "chat_id": user_id,
               "user_id": user_id, "text": text, "message_id": "1", "attachments": attachments or []}
    return {"bot": "b", "message": message, "purpose": "turn"}


async def test_forget_person_deletes_their_people_accounts_sessions_messages_goals_codes_and_inbox(store: SqlStore):
    from storage.repos.people import REMOVED

    alice = await store.resolve_account("telegram", "bot", "111", "Alice")
    alice_slack = await store.resolve_account("slack", "T1", "U9", "alice")
    bob = await store.resolve_account("telegram", "bot", "222", "Bob")
    await store.link_accounts(alice.person_id, alice_slack.person_id)
    dm = await store.active_session("telegram:bot:dm:111", "b")
    await _says(store, dm.id, alice.person_id, "my passport is zebra123")
    await store.record_compaction(session_id=dm.id, first_message_id=1, last_message_id=2,
                                  summary="Alice shared her passport zebra123", tokens_before=9, tokens_after=3)
    frozen = await store.new_session("telegram:bot:dm:111", "b", parent_id=dm.id)  # after /new, not written yet
    await store.update_session(frozen.id, state={"system_prompt": "USER: Alice likes zebras", "owner": alice.person_id})
    group = await store.active_session("telegram:bot:group:-1", "b")
    await store.update_session(group.id, state={"owner": alice.person_id})  # she spoke first there
    await _says(store, group.id, alice.person_id, "zebra123 is my secret")
    await _says(store, group.id, bob.person_id, "hello all")
    bob_dm = await store.active_session("telegram:bot:dm:222", "b")
    await _says(store, bob_dm.id, bob.person_id, "bob's own words")
    await store.create_goal("telegram:bot:dm:111", "b", "plan Alice's trip", session_id=frozen.id)
    await store.create_link_code("ALICE1", alice.person_id, 600)
    await store.record_inbound("telegram", "e1", _payload("bot", "111", "zebra123", [
        {"kind": "photo", "file_name": "a.jpg", "mime_type": "image/jpeg", "size": 3, "path": "/home/att/a.jpg"}]))
    await store.record_inbound("telegram", "e2", _payload("bot", "222", "bob's message"))
    await store.record_rejected("telegram", "bot:rejected:3", {"raw": '{"text": "zebra123"}', "reason": "bad",
                                                               "message": {"account": "bot", "user_id": "111"}})

    report = await store.forget_person(alice.person_id)

    assert report is not None
    assert set(report.person_ids) == {alice.person_id, alice_slack.person_id}
    assert {(a.platform, a.user_id) for a in report.accounts} == {("telegram", "111"), ("slack", "U9")}
    assert report.session_keys == ("telegram:bot:dm:111",) and report.sessions == 2
    assert report.messages == 3 and report.goals == 1 and report.link_codes == 1 and report.inbound == 2
    assert await store.rejected_inbound() == []  # a rejected update of hers goes with her messages
    assert report.attachment_paths == ("/home/att/a.jpg",)
    assert await store.get_person(alice.person_id) is None and await store.get_person(alice_slack.person_id) is None
    assert await store.find_accounts(user_id="111") == [] and await store.find_accounts(platform="slack") == []
    assert await store.get_session(dm.id) is None and await store.get_session(frozen.id) is None
    assert await store.list_compactions([dm.id]) == []
    assert await store.active_goal("telegram:bot:dm:111", "b") is None
    assert await store.redeem_link_code("ALICE1") is None
    assert [e.event_id for e in await store.pending_inbound("telegram")] == ["e2"]
    shared = await store.load_stored_messages(group.id)
    assert [m.message.content for m in shared] == [REMOVED, "noted", "hello all", "noted"]
    assert shared[0].person_id is None and shared[2].person_id == bob.person_id
    assert await store.search_messages(person_id=bob.person_id, bot="b", query="zebra123") == []
    assert [m.content for m in await store.load_messages(bob_dm.id)] == ["bob's own words", "noted"]
    assert (await store.find_accounts(user_id="222"))[0].person_id == bob.person_id
    assert await store.forget_person(alice.person_id) is None  # unknown now


async def test_find_accounts_filters_by_platform_and_platform_user_id(store: SqlStore) -> None:
    ann = await store.resolve_account("telegram", "bot1", "42", "Ann")
    other_bot = await store.resolve_account("telegram", "bot2", "42", "Ann")
    await store.resolve_account("slack", "T1", "42", "Sam")
    found = await store.find_accounts(platform="telegram", user_id="42")
    assert [(a.person_id, a.account) for a in found] == [(ann.person_id, "bot1"), (other_bot.person_id, "bot2")]
    assert len(await store.find_accounts(user_id="42")) == 3 and len(await store.find_accounts()) == 3
