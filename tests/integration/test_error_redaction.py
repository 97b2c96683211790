"""Error text shown to a person never carries a secret: a failed turn and a failed command, through the real
gateway."""

from __future__ import annotations

from fakes.fake_llm import Reply

from hermes_engine.errors import HermesError
from hermes_engine.ports.commands import CommandContext, CommandRegistry
from hermes_engine.ports.feature import Feature
from hermes_engine.secrets import REDACTED

TELEGRAM_TOKEN = "123456789:AAHdqTcvCH1vGWJxfSeofSAs0K5PALDsaw8"
SLACK_TOKEN = "xoxb-123456789012-abcdefghijkl"


class Leaky(Feature):
    """A feature whose failures quote the URL or header they used, as HTTP client errors do."""

    name = "leaky"

    async def call_hook(self, session, message):
        raise HermesError(f"upstream refused https://api.telegram.org/bot{TELEGRAM_TOKEN}/sendMessage")

    def register_commands(self, registry: CommandRegistry) -> None:
        async def sync(ctx: CommandContext) -> str:
            raise HermesError(f"Slack answered invalid_auth for {SLACK_TOKEN}")

        async def status(ctx: CommandContext) -> str:
            return f"Could not reach Telegram: 401 for https://api.telegram.org/bot{TELEGRAM_TOKEN}/getMe"

        registry.command("sync", "Sync with Slack")(sync)
        registry.command("status", "Platform status")(status)


async def test_a_failed_turn_tells_the_person_why_without_the_token(engine, fake_llm):
    fake_llm.script(Reply(text="never reached"))
    e = await engine(features=[Leaky()])
    text = await e.say("hello")
    assert text.startswith("⚠️ Something went wrong with this answer (upstream refused")
    assert TELEGRAM_TOKEN.split(":")[1] not in text and f"bot{REDACTED}/sendMessage" in text


async def test_a_failed_command_tells_the_person_why_without_the_token(engine, fake_llm):
    e = await engine(features=[Leaky()])
    assert await e.say("/sync") == f"Slack answered invalid_auth for {REDACTED}"
    assert await e.say("/status") == f"Could not reach Telegram: 401 for https://api.telegram.org/bot{REDACTED}/getMe"
