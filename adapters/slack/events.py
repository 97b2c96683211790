"""How Slack's events reach the adapter: a slack-bolt `AsyncApp` behind the gateway's own HTTP server (or a
Socket Mode connection, which the adapter opens on the same app).

- HTTP mode: POST `/slack/events` (option `events_path`) carries the Events API and slash commands. Bolt
  verifies `X-Slack-Signature` and rejects timestamps older than five minutes (401, no work). Bolt's own
  `app.start()` is never called: it would bind 0.0.0.0 beside the gateway's server.
- A signed request whose body Bolt cannot read (truncated JSON, not an object) is refused with 400 and a
  log line, before Bolt would fail on it with a 500.
- Events are acknowledged at once (`process_before_response=False`: Bolt acks before the listener runs)
  and the listeners hand the work to a task, so Slack never waits for a turn.
- A retry (`X-Slack-Retry-Num`) of an event this process already took is answered 200 with
  `X-Slack-No-Retry: 1` without touching Bolt; a retry of an event never seen is processed, since the
  first delivery may have been lost. The engine's inbox answers the message once either way.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Awaitable, Callable, Mapping
from typing import Any

from aiohttp import web
from slack_bolt.adapter.aiohttp import to_aiohttp_response
from slack_bolt.async_app import AsyncApp
from slack_bolt.authorization import AuthorizeResult
from slack_bolt.request.async_request import AsyncBoltRequest
from slack_sdk.signature import SignatureVerifier

from adapters.slack.recent import Recent
from adapters.slack.web_api import SlackWebApi

log = logging.getLogger(__name__)

Ack = Callable[..., Awaitable[Any]]
EventListener = Callable[[dict[str, Any], dict[str, Any]], Awaitable[None]]
CommandListener = Callable[[Ack, dict[str, Any]], Awaitable[None]]


def _quiet_bolt(record: logging.LogRecord) -> bool:
    """Bolt reads SLACK_BOT_TOKEN itself and warns that it is unused next to our client: it is, on purpose."""
    return "will be unused" not in record.getMessage()


def bolt_app(api: SlackWebApi, *, name: str, signing_secret: str, on_message: EventListener,
             commands: Mapping[str, CommandListener]) -> AsyncApp:
    """The Bolt app with the message events and `commands` (slash command → listener) wired in."""

    # Bolt gets a client without a token: with a token it would call auth.test through a per-request
    # client that re-reads the proxy variables; `authorize` hands it the cached identity instead.
    # Bolt injects listener arguments by parameter name, so it gets plain functions, not bound methods.
    async def authorize(enterprise_id: str | None, team_id: str | None,
                        user_id: str | None) -> AuthorizeResult | None:
        me = await api.identify()
        if team_id and me.team_id and team_id != me.team_id:
            log.warning("Slack request for workspace %s, but the token belongs to %s", team_id, me.team_id)
            return None
        return AuthorizeResult(enterprise_id=enterprise_id, team_id=me.team_id, bot_token=api.bot_token,
                               bot_id=me.bot_id, bot_user_id=me.user_id, user_id=user_id)

    async def on_event(body: dict[str, Any], event: dict[str, Any]) -> None:
        await on_message(body, event)

    bolt_log = logging.getLogger(f"{__name__}.bolt")
    bolt_log.addFilter(_quiet_bolt)
    # `authorize` may answer None (Bolt then refuses the request), which Bolt's annotation leaves out.
    app = AsyncApp(name=name, client=api.new_client(None), signing_secret=signing_secret,
                   authorize=authorize,  # type: ignore[arg-type]
                   logger=bolt_log, process_before_response=False)
    app.event("app_mention")(on_event)
    app.event("message")(on_event)
    for command, listener in commands.items():
        app.command(command)(_command_listener(listener))
    return app


def _command_listener(listener: CommandListener) -> Callable[[Ack, dict[str, Any]], Awaitable[None]]:
    async def on_command(ack: Ack, body: dict[str, Any]) -> None:
        await listener(ack, body)

    return on_command


def _event_id(body: str) -> str | None:
    try:
        data = json.loads(body)
    except ValueError:
        return None
    return data.get("event_id") if isinstance(data, dict) else None


class EventsEndpoint:
    """The aiohttp handler for `events_path`."""

    def __init__(self, app: AsyncApp, signing_secret: str) -> None:
        self.app = app
        self._verifier = SignatureVerifier(signing_secret) if signing_secret else None
        self._taken: Recent[str, None] = Recent()  # event ids Bolt accepted in this process

    async def handle(self, request: web.Request) -> web.Response:
        body = await request.text()
        event_id = _event_id(body) if request.content_type == "application/json" else None
        if request.headers.get("X-Slack-Retry-Num") is not None and event_id in self._taken \
                and self._signed(body, request.headers):
            log.info("Slack retry %s of event %s acknowledged (already taken)",
                     request.headers.get("X-Slack-Retry-Num"), event_id)
            return web.Response(status=200, headers={"X-Slack-No-Retry": "1"})
        try:
            bolt_request = AsyncBoltRequest(body=body, query=request.query_string,
                                            headers=request.headers)  # type: ignore[arg-type]
        except (ValueError, AttributeError, TypeError) as exc:  # Bolt parses the body as it builds this
            return self._unreadable(body, request, exc)
        if not isinstance(bolt_request.body.get("event", {}), dict):  # Bolt would fail on it later, with a 500
            return self._unreadable(body, request, ValueError("its event is not an object"))
        bolt_response = await self.app.async_dispatch(bolt_request)
        if bolt_response.status == 200 and event_id:
            self._taken.remember(event_id, None)
        return await to_aiohttp_response(bolt_response)

    def _unreadable(self, body: str, request: web.Request, exc: Exception) -> web.Response:
        """A body that is not the JSON object (or form) Slack sends: 400 when Slack signed it, so the sender
        learns it was refused; 401 otherwise, as Bolt answers any unsigned request."""
        if not self._signed(body, request.headers):
            return web.json_response({"error": "invalid request"}, status=401)
        log.warning("refused a signed Slack request whose body cannot be read (%s, %d bytes: %s): %.4000r",
                    request.content_type, len(body), exc, body)
        return web.json_response({"error": "the body is not a request Slack sends"}, status=400)

    def _signed(self, body: str, headers: Mapping[str, str]) -> bool:
        if self._verifier is None:
            return False
        return self._verifier.is_valid(body, headers.get("X-Slack-Request-Timestamp", "0"),
                                       headers.get("X-Slack-Signature", ""))
