"""The MCP servers of one gateway, each started once and kept: one task per server owns its `Client`
(the SDK's sessions live in task groups that must be left by the task that entered them); turns call
through the live session. A server that fails to start or dies is logged in one line and started again
with growing pauses; meanwhile calls to it fail at once and `/ready` names it. Its tools are listed each time
it starts and when it says `tools/list_changed`; the engine takes a changed list into the next sessions.
A session that starts while a server is in its first start may wait for it (`first_start`); its later
restarts keep the tools it listed, so nobody waits for those.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
from collections.abc import Callable
from contextlib import AsyncExitStack
from typing import Any

from mcp import Client
from mcp.client.stdio import StdioServerParameters
from mcp.client.streamable_http import streamable_http_client
from mcp.client.subscriptions import ListenNotSupportedError
from mcp.shared._httpx_utils import create_mcp_http_client
from mcp.shared.exceptions import MCPError
from mcp.types import CONNECTION_CLOSED, ToolListChangedNotification

from hermes_engine.config.mcp import McpServerSettings
from hermes_engine.mcp.remote import RemotePart, RemoteResult, RemoteTool, ServerUnavailable
from hermes_gateway.mcp.confined import ServerSandbox

log = logging.getLogger(__name__)

FIRST_PAUSE = 0.5  # seconds before the first restart; doubles up to MAX_PAUSE
MAX_PAUSE = 60.0
MAX_LISTED_PAGES = 20


def _reason(exc: BaseException) -> str:
    """One line for a failure that may come wrapped in exception groups."""
    while isinstance(exc, BaseExceptionGroup) and exc.exceptions:
        exc = exc.exceptions[0]
    text = str(exc).strip().splitlines()[0] if str(exc).strip() else ""
    return f"{type(exc).__name__}: {text}" if text else type(exc).__name__


def to_result(raw: Any) -> RemoteResult:
    parts: list[RemotePart] = []
    for item in raw.content:
        kind = getattr(item, "type", "")
        if kind == "text":
            parts.append(RemotePart("text", text=item.text))
        elif kind == "image":
            parts.append(RemotePart("image", data=item.data, mime_type=item.mime_type))
        elif kind == "resource_link":
            parts.append(RemotePart("link", text=item.name, uri=str(item.uri), mime_type=item.mime_type or ""))
        elif kind == "resource":
            resource = item.resource
            text = getattr(resource, "text", None)
            parts.append(RemotePart("text", text=text) if text is not None
                         else RemotePart("link", text="embedded resource", uri=str(resource.uri)))
        else:
            parts.append(RemotePart("text", text=f"[{kind or 'unknown'} content left out]"))
    if not parts and raw.structured_content is not None:
        parts.append(RemotePart("text", text=json.dumps(raw.structured_content, ensure_ascii=False)))
    return RemoteResult(parts, bool(raw.is_error))


class ServerRunner:
    """One server: started by `run` (its own task), restarted after a failure, stopped by cancelling."""

    def __init__(self, name: str, settings: McpServerSettings, confine: ServerSandbox) -> None:
        self.name, self.settings, self.confine = name, settings, confine
        self.client: Client | None = None
        self.listed: list[RemoteTool] | None = None  # the latest listing (new sessions take it)
        self.changed: Callable[[], None] = lambda: None  # told when `listed` changes
        self._relist = asyncio.Event()  # the server said tools/list_changed
        self.problem: str | None = "still starting"
        self.started = asyncio.Event()  # set when the first attempt ended, well or not
        self._live = asyncio.Event()
        self._broken = asyncio.Event()
        self.starts = 0  # sessions that came up
        self.attempts = 0

    async def _client(self, stack: AsyncExitStack) -> Client:
        s = self.settings
        if s.command is not None:
            if s.sandbox:
                params = await self.confine.parameters(self.name, s, stack.enter_context(contextlib.ExitStack()))
            else:
                params = StdioServerParameters(command=s.command, args=s.args, env=s.resolved_env(), cwd=s.cwd)
            return Client(params, cache=None, message_handler=self._on_message)
        assert s.url is not None
        http = create_mcp_http_client(headers=s.resolved_headers())
        stack.push_async_callback(http.aclose)
        return Client(streamable_http_client(s.url, http_client=http), cache=None, message_handler=self._on_message)

    async def _on_message(self, message: Any) -> None:
        """Only `tools/list_changed` matters here; the listing is fetched by the session's own task."""
        if isinstance(message, ToolListChangedNotification):
            self._relist.set()

    async def _list(self, client: Client) -> list[RemoteTool]:
        tools, cursor = [], None
        for _ in range(MAX_LISTED_PAGES):
            page = await client.list_tools(cursor=cursor)
            tools += page.tools
            cursor = page.next_cursor
            if not cursor:
                break
        return [RemoteTool(self.name, t.name, t.description or "", dict(t.input_schema or {})) for t in tools]

    def _take(self, listed: list[RemoteTool]) -> None:
        if listed != self.listed:
            self.listed = listed
            self.changed()

    async def _session(self) -> None:
        async with AsyncExitStack() as stack, asyncio.timeout(self.settings.start_timeout) as deadline:
            client = await stack.enter_async_context(await self._client(stack))
            tools = await self._list(client)
            deadline.reschedule(None)
            self.client, self.problem = client, None
            self.starts += 1
            self._broken.clear()
            self._live.set()
            self.started.set()
            log.info("MCP server %s is running (%d tools)", self.name, len(tools))
            self._take(tools)
            await self._serve(client)

    async def _serve(self, client: Client) -> None:
        """Until the connection breaks: list the tools again whenever the server says they changed."""
        watcher = asyncio.create_task(self._listen(client), name=f"mcp:{self.name}:listen")
        try:
            await self._relist_until_broken(client)
        finally:
            watcher.cancel()
            with contextlib.suppress(asyncio.CancelledError, Exception):
                await watcher

    async def _listen(self, client: Client) -> None:
        """Servers of the 2026-07-28 protocol announce changes on a `subscriptions/listen` stream; older
        ones send `notifications/tools/list_changed`, which `_on_message` hears."""
        try:
            async with client.listen(tools_list_changed=True) as subscription:
                async for _event in subscription:
                    self._relist.set()
        except ListenNotSupportedError:
            return
        except Exception as exc:  # noqa: BLE001 - the tools stay as listed; a restart lists them again
            log.debug("MCP server %s: no change stream (%s)", self.name, _reason(exc))

    async def _relist_until_broken(self, client: Client) -> None:
        while not self._broken.is_set():
            broken = asyncio.ensure_future(self._broken.wait())
            relist = asyncio.ensure_future(self._relist.wait())
            try:
                await asyncio.wait({broken, relist}, return_when=asyncio.FIRST_COMPLETED)
            finally:
                broken.cancel()
                relist.cancel()
            if self._relist.is_set() and not self._broken.is_set():
                self._relist.clear()
                async with asyncio.timeout(self.settings.start_timeout):
                    self._take(await self._list(client))

    async def run(self) -> None:
        pause = FIRST_PAUSE
        while True:
            self.attempts += 1
            try:
                await self._session()
                pause = FIRST_PAUSE
            except asyncio.CancelledError:
                raise
            except BaseException as exc:  # noqa: BLE001 - any failure of a server is logged, never raised
                before, self.problem = self.problem, _reason(exc) if not isinstance(exc, TimeoutError) else (
                    f"no answer within {self.settings.start_timeout:g} s")
                # One line per new problem; the same failure again (every retry) only at debug level.
                log.log(logging.DEBUG if self.problem == before else logging.ERROR,
                        "MCP server %s failed: %s; trying again in %g s", self.name, self.problem, pause)
            finally:
                self.client = None
                self._live.clear()
                self.started.set()
            await asyncio.sleep(pause)
            pause = min(pause * 2, MAX_PAUSE)

    async def call(self, tool: str, arguments: dict[str, Any], timeout: float) -> RemoteResult:
        async with asyncio.timeout(timeout):
            if self.client is None and self.listed is not None:
                await self._live.wait()  # it ran before and is being started again
            client = self.client
            if client is None:
                raise ServerUnavailable(self.problem or "not running")
            try:
                raw = await client.call_tool(tool, arguments)
            except MCPError as exc:
                if exc.error.code != CONNECTION_CLOSED:
                    return RemoteResult([RemotePart("text", text=f"MCP error: {exc.error.message}")], is_error=True)
                self._restart(client)
                raise ServerUnavailable("it closed the connection and is being started again") from None
            except (asyncio.CancelledError, TimeoutError):
                raise
            except Exception:
                self._restart(client)
                raise
        return to_result(raw)

    def _restart(self, client: Client) -> None:
        """The connection is gone: later calls wait for the next start instead of using it."""
        if self.client is client:
            self.client = None
            self._live.clear()
            self.problem = "restarting"
            self._broken.set()


class ServerManager:
    """Implements the engine's `McpServers` for one bot profile."""

    def __init__(self, servers: dict[str, McpServerSettings], confine: ServerSandbox) -> None:
        self.runners = {name: ServerRunner(name, s, confine) for name, s in servers.items()}
        self._tasks: list[asyncio.Task[None]] = []

    async def start(self) -> None:
        """Start every server and wait for each first attempt (bounded by its `start_timeout`)."""
        if self._tasks:
            return
        self._tasks = [asyncio.create_task(r.run(), name=f"mcp:{n}") for n, r in self.runners.items()]
        await asyncio.gather(*(r.started.wait() for r in self.runners.values()))

    async def stop(self) -> None:
        for task in self._tasks:
            task.cancel()
        for task in self._tasks:
            with contextlib.suppress(asyncio.CancelledError, Exception):
                await task
        self._tasks = []

    def tools(self) -> list[RemoteTool]:
        return [t for r in self.runners.values() for t in (r.listed or [])]

    async def first_start(self, timeout: float) -> list[str]:
        waiting = [r.started.wait() for r in self.runners.values() if not r.started.is_set()]
        if waiting:
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(asyncio.gather(*waiting), timeout)
        return [f"MCP server {n} ({r.problem})" for n, r in self.runners.items() if r.listed is None]

    def watch(self, changed: Callable[[], None]) -> None:
        for runner in self.runners.values():
            runner.changed = changed

    def not_ready(self) -> list[str]:
        return [f"MCP server {n} is not running ({r.problem})" for n, r in self.runners.items()
                if r.client is None]

    async def call(self, server: str, tool: str, arguments: dict[str, Any], timeout: float) -> RemoteResult:
        runner = self.runners.get(server)
        if runner is None:
            raise ServerUnavailable(f"no server {server!r}")
        return await runner.call(tool, arguments, timeout)
