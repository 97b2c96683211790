"""MCP servers' tools as the agent's tools, one feature per bot.

The servers start with the gateway (not per turn) and their tools join the bot's registry when they
answer. A session takes the registry's tools when it loads and keeps them (the provider's prompt cache
stays valid); a server's `tools/list_changed`, a changed list after a restart, or a server that comes up
late changes the registry, and so the sessions that start from then on. A session that starts while a
server is still in its first start (a message waiting when the gateway starts is taken at once) waits for
it, up to the profile's `mcp_start_wait_seconds`: no conversation misses its tools for having come a moment
early, and one that comes when every server is up or has failed does not wait at all.

Schemas are paid for on every request. Tools are listed in full, in a fixed order, until their schemas
would pass the profile's `mcp_schema_budget` (tokens); the rest are named in one line each inside
`mcp_call`'s description, and the model asks `mcp_describe` for a schema, which arrives as a tool result:
the request's tool list never changes.

A call's arguments are checked against the schema of the tool it names (through `mcp_call` too) and
coerced where that loses nothing before the server sees them: a server that validates strictly is not
sent `"5"` for an integer. Every result, and every page of a cut one, is marked as untrusted data; a
failure of any kind reaches the model as a tool error. A cut result is read on only in the session whose
call produced it, and only by a turn that may call its server.
A tool the profile marks as acting on the world (`approval`, `approve_tools`) is called only once an
approver said yes, through the same gate as the terminal's dangerous commands; a denial reaches the
model as a tool error and the server never sees the call.
"""

from __future__ import annotations

import json
import logging
from typing import TYPE_CHECKING, Any

from hermes_engine.config.mcp import McpServerSettings
from hermes_engine.mcp.names import tool_names
from hermes_engine.mcp.remote import McpServers, RemoteResult, RemoteTool, ServerUnavailable
from hermes_engine.mcp.results import KEPT_RESULTS, ResultPages, render
from hermes_engine.policy import untrusted
from hermes_engine.ports.approval import Decision
from hermes_engine.ports.feature import Feature
from hermes_engine.ports.tools import Tool, ToolContext, ToolResult
from hermes_engine.tools.registry import FunctionTool

if TYPE_CHECKING:
    from hermes_engine.approvals.gate import ApprovalGate
    from hermes_engine.ports.host import Host

log = logging.getLogger(__name__)

CHARS_PER_TOKEN = 4  # schema text is dense JSON; a rough and slightly generous estimate
CONTEXT_PARAM = "_hermes_ctx"  # never a JSON-schema property a server declares (leading underscore + prefix)
TIME_SLACK = 5.0  # the registry's limit stays above the server's own timeout, which reports more clearly
COMPACT_TOOLSET = "mcp"


def schema_tokens(name: str, description: str, parameters: dict[str, Any]) -> int:
    return (len(name) + len(description) + len(json.dumps(parameters, separators=(",", ":")))) // CHARS_PER_TOKEN


def session_of(ctx: ToolContext) -> tuple[str, int, str | None]:
    """Whose a kept result is: the conversation's key alone would let a kanban card's worker (session id 0,
    a workspace of its own) read what another card or the chat itself was shown."""
    return ctx.session_key, ctx.session_id, ctx.workspace


def _short(description: str, limit: int = 80) -> str:
    line = description.strip().split("\n", 1)[0]
    return line if len(line) <= limit else line[: limit - 1] + "…"


class McpFeature(Feature):
    name = "mcp"

    def __init__(self, servers: McpServers, settings: dict[str, McpServerSettings], budget: int,
                 approvals: ApprovalGate | None = None, *, start_wait: float) -> None:
        self.servers, self.settings, self.budget, self.start_wait = servers, settings, budget, start_wait
        self.approvals = approvals  # without one, a call that needs approval is denied
        self.pages = ResultPages()
        self._host: Host | None = None
        self._registered: list[str] = []
        self._built_from: list[RemoteTool] | None = None
        self.compact: dict[str, RemoteTool] = {}  # of the latest build (`hermes-gateway mcp list` shows them)

    async def start(self, host: Host) -> None:
        self._host = host
        # Watched from before the start: each server's tools join as it comes up, not with the slowest,
        # so a session waiting for that server (`settle_tools`) finds them.
        self.servers.watch(self.refresh)
        await self.servers.start()
        self.refresh()

    async def settle_tools(self) -> list[str]:
        return await self.servers.first_start(self.start_wait)

    def refresh(self) -> None:
        """Put the servers' current tools in the bot's registry (sessions already loaded keep their copy)."""
        host = self._host
        remotes = self.servers.tools()
        if host is None or remotes == self._built_from:
            return
        for name in self._registered:
            host.tools.unregister(name)
        tools = self.build_tools({t.name for t in host.tools})
        for t in tools:
            host.tools.register(t)
        self._registered, self._built_from = [t.name for t in tools], remotes
        if self._registered:
            log.info("MCP tools for new sessions: %d", len(tools))

    async def stop(self) -> None:
        await self.servers.stop()

    def not_ready(self) -> list[str]:
        return self.servers.not_ready()

    # ----------------------------------------------------------------- the tool list

    def _wanted(self, remote: RemoteTool) -> bool:
        rules = self.settings.get(remote.server)
        if rules is None:
            return False
        if rules.include and remote.name not in rules.include:
            return False
        return remote.name not in rules.exclude

    def build_tools(self, taken: set[str]) -> list[Tool]:
        """The tools for the servers that have started: full ones within the budget, then the generic pair."""
        remotes = sorted((r for r in self.servers.tools() if self._wanted(r)), key=lambda r: (r.server, r.name))
        reserved = {"mcp_call", "mcp_describe", "mcp_result_page"}
        names = tool_names([(r.server, r.name) for r in remotes], taken | reserved)
        tools: list[Tool] = []
        listed: dict[str, RemoteTool] = {}  # model-facing name → remote tool, full or compact
        full: dict[str, Tool] = {}  # the same, as tools (which check their arguments), listed or not
        compact: dict[str, RemoteTool] = {}
        spent = 0
        for remote in remotes:
            name = names[(remote.server, remote.name)]
            listed[name], full[name] = remote, self._full_tool(name, remote)
            cost = schema_tokens(name, remote.description, remote.input_schema)
            if not compact and spent + cost <= self.budget:
                spent += cost
                tools.append(full[name])
            else:
                compact[name] = remote
        self.compact = compact
        if compact:
            tools += [self._call_tool(compact, full), self._describe_tool(listed)]
        if remotes:
            tools.append(self._page_tool())
        return tools

    def _full_tool(self, name: str, remote: RemoteTool) -> Tool:
        async def run(**arguments: Any) -> ToolResult:
            ctx = arguments.pop(CONTEXT_PARAM)
            return await self.call(remote, arguments, ctx)

        parameters = remote.input_schema or {"type": "object", "properties": {}}
        return FunctionTool(name, remote.description or f"{remote.name} (MCP server {remote.server})", parameters, run,
                    f"mcp:{remote.server}", CONTEXT_PARAM, self._limit(remote.server))

    def _call_tool(self, compact: dict[str, RemoteTool], full: dict[str, Tool]) -> Tool:
        listing = "\n".join(f"- {name}: {_short(r.description)}" for name, r in sorted(compact.items()))

        async def run(tool: str, arguments: dict[str, Any] | None = None, **rest: Any) -> ToolResult:
            target = full.get(tool)
            if target is None:
                return ToolResult(f"Error: no MCP tool {tool!r}; the tools are:\n{listing}", is_error=True)
            return await target.invoke(arguments or {}, rest[CONTEXT_PARAM])  # checked against its own schema

        description = ("Call one of these MCP tools (ask mcp_describe for its arguments first):\n" + listing)
        parameters = {"type": "object", "properties": {
            "tool": {"type": "string", "description": "a name from the list"},
            "arguments": {"type": "object", "description": "as mcp_describe says"}}, "required": ["tool"]}
        limit = max((self._limit(r.server) for r in compact.values()), default=60.0)
        return FunctionTool("mcp_call", description, parameters, run, COMPACT_TOOLSET, CONTEXT_PARAM, limit)

    def _describe_tool(self, listed: dict[str, RemoteTool]) -> Tool:
        def run(tool: str) -> str:
            remote = listed.get(tool)
            if remote is None:
                return f"Error: no MCP tool {tool!r}; see the list in mcp_call."
            return json.dumps({"tool": tool, "description": remote.description,
                               "arguments": remote.input_schema}, ensure_ascii=False)

        parameters = {"type": "object", "properties": {"tool": {"type": "string"}}, "required": ["tool"]}
        return FunctionTool("mcp_describe", "The description and argument schema of an MCP tool listed in mcp_call.",
                    parameters, run, COMPACT_TOOLSET)

    def _page_tool(self) -> Tool:
        async def run(ref: str, offset: int, **rest: Any) -> ToolResult:
            ctx: ToolContext = rest[CONTEXT_PARAM]
            kept = self.pages.find(ref, session_of(ctx))
            if kept is None:
                return ToolResult(f"Error: no kept result {ref!r} (only the last {KEPT_RESULTS} cut results "
                                  "are kept).", is_error=True)
            refused = await self.refusal(kept.server, ctx)
            if refused:
                return ToolResult(refused, is_error=True)
            ctx.untrusted = True  # as for the result's first part: this turn's writes scan strictly
            return ToolResult(untrusted.mark(kept.page(offset, 20_000), kept.source))

        parameters = {"type": "object", "properties": {"ref": {"type": "string"}, "offset": {"type": "integer"}},
                      "required": ["ref", "offset"]}
        return FunctionTool("mcp_result_page", "Read on in an MCP tool result that was cut.", parameters, run,
                    COMPACT_TOOLSET, CONTEXT_PARAM)

    def _limit(self, server: str) -> float:
        rules = self.settings[server]
        waiting = self.approvals.timeout_seconds if self.approvals and (rules.approval == "always"
                                                                         or rules.approve_tools) else 0.0
        return rules.timeout + TIME_SLACK + waiting

    # ----------------------------------------------------------------- calls

    async def refusal(self, server: str, ctx: ToolContext) -> str | None:
        access = self.settings[server].access
        if ctx.in_review:
            return f"Error: the tools of {server} are not used in the background review (they may act on the world)."
        if access.chats == "dm" and ctx.chat_kind != "dm":
            return f"Error: the tools of {server} may be used in direct messages only."
        if access.people == "admins" and not ctx.is_admin:
            return f"Error: the tools of {server} may be used by the bot's admins only."
        if access.people == "allowed" and not (ctx.is_admin or await self._allowed(ctx)):
            return f"Error: the tools of {server} may be used by the people the bot allows only."
        return None

    async def _allowed(self, ctx: ToolContext) -> bool:
        if self._host is None or ctx.user_id is None or ctx.target is None:
            return False
        return await self._host.is_allowed(ctx.target.platform, ctx.user_id)

    async def call(self, remote: RemoteTool, arguments: dict[str, Any], ctx: ToolContext) -> ToolResult:
        refused = await self.refusal(remote.server, ctx)
        if refused:
            return ToolResult(refused, is_error=True)
        rules = self.settings[remote.server]
        source = f"MCP server {remote.server}, tool {remote.name}"
        if rules.needs_approval(remote.name):
            denied = await self._denial(remote, arguments, ctx)
            if denied:
                return ToolResult(f"Denied: {source} was not called ({denied}).", is_error=True)
        try:
            result = await self.servers.call(remote.server, remote.name, arguments, rules.timeout)
        except ServerUnavailable as exc:
            return ToolResult(f"Error: {source} is not available ({exc}); try again later.", is_error=True)
        except TimeoutError:
            return ToolResult(f"Error: {source} did not answer within {rules.timeout:g} s.", is_error=True)
        except Exception as exc:  # whatever the transport or the server raised; the turn goes on
            return ToolResult(f"Error: {source} failed: {type(exc).__name__}: {exc}", is_error=True)
        ctx.untrusted = True  # the model reads it next: this turn's writes to memory and skills scan strictly
        return self.as_tool_result(result, remote.server, source, rules.max_result_chars, ctx)

    async def _denial(self, remote: RemoteTool, arguments: dict[str, Any], ctx: ToolContext) -> str | None:
        """Ask the approvers; None when they approved, else why not."""
        if self.approvals is None or ctx.target is None:
            return "it needs approval and nobody can be asked"
        shown = json.dumps(arguments, ensure_ascii=False)
        shown = shown if len(shown) <= 500 else shown[:499] + "…"
        decision, note = await self.approvals.decide(
            bot=ctx.bot, session_key=ctx.session_key, target=ctx.target,
            command=f"{remote.server}: {remote.name} {shown}", risk=f"mcp:{remote.server}/{remote.name}",
            reason="an MCP tool that acts on the world", question="Call this tool?", asked_by=ctx.user_id or "")
        return note if decision is Decision.DENY else None

    def as_tool_result(self, result: RemoteResult, server: str, source: str, limit: int,
                       ctx: ToolContext) -> ToolResult:
        text, images = render(result)
        shown = self.pages.cut(text, limit, owner=session_of(ctx), server=server, source=source)
        return ToolResult(untrusted.mark(shown, source), result.is_error, images)
