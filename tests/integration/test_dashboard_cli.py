"""`hermes-gateway dashboard link` and the `/dashboard` chat command: who gets a sign-in link, and where."""

from __future__ import annotations

import asyncio
import re
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from cli_kit import invoke

from hermes_engine.ports.commands import CommandContext, CommandRegistry
from hermes_engine.ports.inbound import ChatKind, InboundMessage, ReplyTarget
from hermes_gateway.dashboard.command import NOT_ADMIN, register_dashboard_command
from hermes_gateway.dashboard.config import Dashboard
from hermes_gateway.dashboard.tokens import hashed
from storage.store import SqlStore


async def _taken(db: Path, token: str) -> str | None:
    store = SqlStore(f"sqlite+aiosqlite:///{db}")
    await store.init()
    try:
        return await store.take_dashboard_link(hashed(token))
    finally:
        await store.close()


def test_the_operator_gets_a_link_that_signs_in_once(tmp_path: Path) -> None:
    asyncio.run(_taken(tmp_path / "hermes.db", "none"))  # the service's database, made by its first start
    ran = invoke("dashboard", "link", env={"HERMES_HOME": str(tmp_path), "HERMES_PUBLIC_URL": "https://bot.example.com"})
    assert ran.code == 0, ran.err
    found = re.fullmatch(r"https://bot\.example\.com/admin/login\?token=([0-9a-f]{64})\n", ran.out)
    assert found, ran.out
    assert "works once, for 10 minutes" in ran.err
    assert asyncio.run(_taken(tmp_path / "hermes.db", found.group(1))) == "operator"
    assert asyncio.run(_taken(tmp_path / "hermes.db", found.group(1))) is None


def test_a_public_url_with_a_path_is_one_sentence(tmp_path: Path) -> None:
    asyncio.run(_taken(tmp_path / "hermes.db", "none"))
    ran = invoke("dashboard", "link", env={"HERMES_HOME": str(tmp_path), "HERMES_PUBLIC_URL": "https://x.example/bot"})
    assert ran.code == 2 and "HERMES_PUBLIC_URL must be" in ran.err


@dataclass
class Host:
    """What the command asks of the engine: to post a message."""

    sent: list[tuple[ReplyTarget, str, str | None]] = field(default_factory=list)

    async def notify(self, target: ReplyTarget, text: str, *, idempotency_key: str | None = None) -> bool:
        self.sent.append((target, text, idempotency_key))
        return True


@dataclass
class Links:
    """The store's sign-in links, as the command makes them."""

    made: list[tuple[str, str, datetime]] = field(default_factory=list)

    async def put_dashboard_link(self, token_hash: str, admin: str, expires_at: datetime) -> None:
        self.made.append((token_hash, admin, expires_at))


async def _dashboard(kind: ChatKind, is_admin: bool) -> tuple[str | None, Host, Links]:
    registry, host, links = CommandRegistry(), Host(), Links()
    register_dashboard_command(registry, links, Dashboard("http://127.0.0.1:8080", 600, 3600))  # type: ignore[arg-type]
    msg = InboundMessage("telegram", "bot", kind, "42", "42", "/dashboard", "7")
    command = registry.get("dashboard")
    assert command is not None and not command.admin_only
    context: Any = CommandContext(host, None, msg, 1, "", is_admin)  # type: ignore[arg-type]
    return await command.handler(context), host, links


async def test_an_admin_in_a_dm_is_sent_a_link_for_ten_minutes() -> None:
    answer, host, links = await _dashboard(ChatKind.DM, is_admin=True)
    assert answer is None
    [(target, text, key)] = host.sent
    assert target.chat_id == "42" and key == "bot:42:7:command"
    token = re.search(r"/admin/login\?token=([0-9a-f]{64})$", text)
    assert token and text.startswith("Your dashboard link (works once, for 10 minutes):")
    [(token_hash, admin, expires)] = links.made
    assert token_hash == hashed(token.group(1)) and admin == "telegram:42"
    assert 590 < (expires - datetime.now(UTC)).total_seconds() <= 600


async def test_someone_who_is_not_an_admin_gets_one_sentence() -> None:
    answer, host, links = await _dashboard(ChatKind.DM, is_admin=False)
    assert answer == NOT_ADMIN and not host.sent and not links.made


async def test_an_admin_in_a_group_is_asked_for_a_dm() -> None:
    answer, host, links = await _dashboard(ChatKind.GROUP, is_admin=True)
    assert answer is not None and "direct message" in answer and not host.sent and not links.made


def test_without_a_public_url_links_point_at_the_server_itself() -> None:
    from hermes_engine.config import Settings

    everywhere = Dashboard.from_settings(Settings(http_host="0.0.0.0", http_port=9000))
    assert (everywhere.public_url, everywhere.host, everywhere.secure) == ("http://127.0.0.1:9000", "127.0.0.1:9000",
                                                                          False)
    assert Dashboard.from_settings(Settings(http_host="::1", http_port=80)).host == "[::1]"  # as browsers send it
    assert Dashboard("https://bot.example.com:443", 1, 1).normal_host("Bot.Example.com:443") == "bot.example.com"
