"""The workspace feature: the `terminal` and `files` toolsets and the `/workspace` command.

Who may use them: admins of the bot anywhere; with `workspace.users: allowed_in_dm`, also every person
allowed to talk to the bot, in their own direct messages. A goal continuation or a kanban worker acts for
the person who set the goal or made the card (their access, the workspace of the conversation it came from;
dangerous commands are asked about in that conversation, and expiry denies). Never a background review:
it is a guest, acting for nobody.
If the profile selects `terminal` and bubblewrap cannot run, the feature refuses to start and says why:
commands never run outside the sandbox. Network for the sandbox is refused the same way: bwrap could
only share the host's network namespace, and that includes the host's loopback services.
Where no cgroup can be made for each command, the terminal still starts, with one warning saying which
limits hold (`sandbox.limits_holding`).
"""

from __future__ import annotations

import asyncio
import functools
import logging
import threading
from collections.abc import Callable
from pathlib import Path

from hermes_engine.approvals.gate import ApprovalGate
from hermes_engine.config import WorkspaceSettings
from hermes_engine.errors import ConfigError, PlatformError
from hermes_engine.ports.approval import ApprovalAsker, Decision
from hermes_engine.ports.commands import CommandContext, CommandRegistry
from hermes_engine.ports.feature import Feature
from hermes_engine.ports.host import Host
from hermes_engine.ports.inbound import InboundMessage
from hermes_engine.ports.reply import FileOutlet, OutgoingFile
from hermes_engine.ports.session import SessionScope
from hermes_engine.ports.tools import Tool, ToolContext, ToolResult
from hermes_engine.tools.registry import tool
from hermes_engine.workspace import cgroups, files, sandbox, sandbox_network
from hermes_engine.workspace.folders import WorkspaceFolders
from hermes_engine.workspace.mounts import say_what_commands_see
from hermes_engine.workspace.progress import OutputShown
from hermes_engine.workspace.risk import classify
from hermes_engine.workspace.sending import ATTACHED, FileOutlets, attached, prepare, send_key, sent_file
from hermes_engine.workspace.space import Workspace, WorkspaceError, scope_name
from hermes_engine.workspace.uids import pool_for

MB = 1024 * 1024
FILE_TOOL_SECONDS = 30.0
SEND_FILE_SECONDS = 300.0  # an upload of up to the platform's limit, after a 429's wait
log = logging.getLogger(__name__)


@functools.cache
def _say_which_limits_hold() -> None:
    """Once a process, however many bots run a terminal: the operator learns at start when a command's
    memory limit holds only per process."""
    if cgroups.hierarchies() is None:
        log.warning("terminal sandbox: %s", sandbox.limits_holding())
    else:
        log.info("terminal sandbox: %s", sandbox.limits_holding())


class WorkspaceFeature(Feature):
    name = "workspace"

    def __init__(self, home: Path, bot: str, settings: WorkspaceSettings, *, admins: list[str],
                 asker: ApprovalAsker | None = None, toolsets: list[str] | None = None,
                 root: Path | None = None, outlets: FileOutlets | None = None,
                 attachments: Callable[[str], Path] | None = None) -> None:
        self.bot = bot
        self.outlets = outlets if outlets is not None else FileOutlets()  # where `send_file` sends
        self.attachments = attachments  # a conversation's key → the folder of the files its people sent
        self.folders = WorkspaceFolders.of(home, root)  # root None: under the home
        self.settings = settings
        self.toolsets = toolsets or []
        self.uids = pool_for(settings.uid_first, settings.uid_count)
        approvers = {str(u) for u in (settings.approvers or admins)}
        self.approvals = ApprovalGate(asker, approvers.__contains__, settings.approval_timeout_seconds,
                                      settings.person_approves)

    # ------------------------------------------------------------------ lifecycle

    async def start(self, host: Host) -> None:
        if "terminal" in self.toolsets:
            await self._check_sandbox()
            await asyncio.to_thread(say_what_commands_see, self.folders.root, self.folders.home)
        self.approvals.share_through(host.store, host.bot)  # the MCP tools' approvals ask through it too

    async def _check_sandbox(self) -> None:
        reason = await asyncio.to_thread(sandbox.unavailable_reason)
        if reason is None and self.settings.network:
            reason = sandbox_network.unavailable_reason()
        if reason is not None:
            raise ConfigError(f"The terminal toolset cannot start: {reason} Commands never run unsandboxed.")
        await asyncio.to_thread(_say_which_limits_hold)

    def on_message(self, session_key: str, message: InboundMessage) -> None:
        if message.command == "stop":
            self.approvals.supersede(session_key, "/stop was sent before anyone answered")
        else:
            self.approvals.supersede(session_key)

    def on_session_evicted(self, scope: SessionScope) -> None:
        self.approvals.forget(scope.session_key)

    # ------------------------------------------------------------------ who and where

    def workspace_for(self, *, chat_kind: str, person_id: int | None, session_key: str) -> Workspace:
        return self._scope(scope_name(chat_kind=chat_kind, person_id=person_id, session_key=session_key))

    def _scope(self, scope: str) -> Workspace:
        return Workspace(self.folders.folder(self.bot, scope), int(self.settings.quota_mb * MB)).ensure()

    def refusal(self, ctx: ToolContext) -> str | None:
        if ctx.in_review or ctx.user_id is None:
            return "Error: the workspace tools are only for a person's own turns."
        if ctx.is_admin:
            return None
        if self.settings.users == "allowed_in_dm" and ctx.chat_kind == "dm":
            return None
        where = " in a direct message" if self.settings.users == "allowed_in_dm" else ""
        return f"Error: only an admin of this bot can use the workspace tools{where}."

    def _workspace(self, ctx: ToolContext) -> Workspace:
        refused = self.refusal(ctx)
        if refused:
            raise WorkspaceError(refused)
        if ctx.workspace is not None:
            return self._scope(ctx.workspace)
        return self.workspace_for(chat_kind=ctx.chat_kind, person_id=ctx.person_id, session_key=ctx.session_key)

    # ------------------------------------------------------------------ tools

    def tools(self) -> list[Tool]:
        limit = self.settings.max_timeout_seconds + self.settings.approval_timeout_seconds + 30
        return [tool(self.terminal, name="terminal", toolset="terminal", time_limit=limit),
                *(tool(fn, name=name, toolset="files", time_limit=FILE_TOOL_SECONDS) for name, fn in (
                    ("read_file", self.read_file), ("write_file", self.write_file), ("patch", self.patch),
                    ("list_files", self.list_files), ("search_files", self.search_files))),
                tool(self.send_file, name="send_file", toolset="files", time_limit=SEND_FILE_SECONDS)]

    async def terminal(self, ctx: ToolContext, command: str, timeout: float | None = None) -> ToolResult:
        """Run a shell command in this conversation's sandboxed workspace (/workspace; no network).

        Args:
            command: shell command line, run with /bin/sh -c
            timeout: seconds before the command is killed (default 60)
        """
        try:
            ws = await asyncio.to_thread(self._workspace, ctx)
        except WorkspaceError as exc:
            return ToolResult(str(exc), is_error=True)
        risk = classify(command, strict=ctx.untrusted)
        if risk.level in self.settings.approve:
            if ctx.target is None:
                return ToolResult(f"Denied: this command needs approval ({risk.reason}) and nobody can be asked.",
                                  is_error=True)
            decision, note = await self.approvals.decide(bot=ctx.bot, session_key=ctx.session_key,
                                                         target=ctx.target, command=command, risk=risk.level,
                                                         reason=risk.reason, asked_by=ctx.user_id or "")
            if decision is Decision.DENY:
                return ToolResult(f"Denied: the command was not run ({risk.level}: {risk.reason}; {note}).",
                                  is_error=True)
        seconds = min(timeout or self.settings.timeout_seconds, self.settings.max_timeout_seconds)
        room = await asyncio.to_thread(ws.room)
        limits = sandbox.Limits(seconds=seconds, memory_bytes=self.settings.memory_mb * MB,
                                processes=self.settings.processes, cpu_seconds=self.settings.cpu_seconds,
                                file_bytes=room)
        stop = threading.Event()
        shown = OutputShown(ctx.progress, command) if ctx.progress is not None else None
        result: sandbox.RunResult | None = None
        try:
            result = await asyncio.get_running_loop().run_in_executor(
                None, functools.partial(sandbox.run, ws.root, command, limits, stop=stop, uids=self.uids,
                                        on_output=shown.feed if shown else None, network=self.settings.network))
        except sandbox.SandboxUnavailable as exc:
            return ToolResult(f"Error: the terminal is unavailable: {exc}", is_error=True)
        finally:
            stop.set()  # a cancelled turn (/stop) ends the command too
            if shown is not None:
                await shown.close(result)
        text = result.text()
        if await asyncio.to_thread(ws.size) > ws.quota_bytes:
            text += f"\n[the workspace is over its quota of {ws.quota_bytes:,} bytes: delete files]"
        return ToolResult(text, is_error=result.exit_code != 0)

    def _file_tool(self, ctx: ToolContext, action: Callable[[Workspace], str]) -> ToolResult:
        try:
            return ToolResult(action(self._workspace(ctx)))
        except WorkspaceError as exc:
            return ToolResult(f"Error: {exc}".replace("Error: Error: ", "Error: "), is_error=True)
        except UnicodeDecodeError:
            return ToolResult("Error: that file is not UTF-8 text.", is_error=True)

    def read_file(self, ctx: ToolContext, path: str, offset: int = 1, limit: int = 500) -> ToolResult:
        """Read a text file of the workspace, with line numbers; a file the person sent in this conversation
        is /attachments/<its name>.

        Args:
            path: relative to the workspace, or /attachments/<name>
            offset: first line (1-based)
            limit: number of lines
        """
        if path.strip().startswith(ATTACHED):
            return self._file_tool(ctx, lambda _: files.read_lines(*self._sent(ctx, path), offset, limit))
        return self._file_tool(ctx, lambda ws: files.read_lines(ws, path, offset, limit))

    def write_file(self, ctx: ToolContext, path: str, content: str) -> ToolResult:
        """Create or overwrite a text file in the workspace (folders are made as needed).

        Args:
            path: relative to the workspace
            content: the whole file
        """
        return self._file_tool(ctx, lambda ws: files.write_text(ws, path, content))

    def patch(self, ctx: ToolContext, path: str, old: str, new: str) -> ToolResult:
        """Replace one exact, unique piece of text in a workspace file.

        Args:
            path: relative to the workspace
            old: the text to replace, exactly as in the file
            new: the replacement
        """
        return self._file_tool(ctx, lambda ws: files.patch_text(ws, path, old, new))

    def list_files(self, ctx: ToolContext, path: str = ".") -> ToolResult:
        """List a folder of the workspace.

        Args:
            path: relative to the workspace
        """
        return self._file_tool(ctx, lambda ws: files.list_entries(ws, path))

    def search_files(self, ctx: ToolContext, pattern: str) -> ToolResult:
        """Find lines (and file names) matching a regular expression in the workspace.

        Args:
            pattern: Python regular expression
        """
        return self._file_tool(ctx, lambda ws: files.search(ws, pattern))

    async def send_file(self, ctx: ToolContext, path: str, caption: str = "") -> ToolResult:
        """Send a file of the workspace to the person, as a file in this chat or thread (an image as a photo
        where the platform shows photos). Write it first (write_file, or a terminal command). Size limits:
        Telegram 50 MB (photos 10 MB, larger images go as documents), Slack 50 MB, Discord 10 MB. A file the
        person sent in this conversation is /attachments/<its name>.

        Args:
            path: relative to the workspace, e.g. report.csv or charts/sales.png; or /attachments/<name>
            caption: a short plain-text line shown with the file (optional)
        """
        target = ctx.target
        outlet = self.outlets.get(target.platform) if target is not None else None
        if target is None or outlet is None:
            return ToolResult("Error: files cannot be sent from here (no chat platform to send them to).",
                              is_error=True)
        try:
            file = await asyncio.to_thread(self._outgoing, ctx, path, caption, outlet)
        except WorkspaceError as exc:
            return ToolResult(f"Error: {exc}".replace("Error: Error: ", "Error: "), is_error=True)
        try:
            sent = await outlet.send_file(target, file, idempotency_key=send_key(ctx, file))
        except PlatformError as exc:
            return ToolResult(f"Error: {target.platform} refused {file.name}: {exc}", is_error=True)
        if not sent:
            return ToolResult(f"{file.name} was not sent again: it was already sent in this turn, or its upload "
                              "was under way when the gateway restarted and is not repeated, so it never arrives "
                              "twice. Ask the person whether it arrived if unsure.")
        return ToolResult(f"Sent {file.name} ({file.size:,} bytes, {file.media_type}) to the person.")

    def _outgoing(self, ctx: ToolContext, path: str, caption: str, outlet: FileOutlet) -> OutgoingFile:
        ws = self._workspace(ctx)  # the same refusals as every file tool
        if path.strip().startswith(ATTACHED):
            return attached(self._attachments(ctx), path.strip(), caption, outlet)
        return prepare(ws, path, caption, outlet)

    def _attachments(self, ctx: ToolContext) -> Path:
        """The folder of the files the person sent in this conversation (not from a sub-agent's or a card's
        own workspace)."""
        if self.attachments is None or ctx.workspace is not None:
            raise WorkspaceError("The files people sent cannot be reached from here.")
        return self.attachments(ctx.session_key)

    def _sent(self, ctx: ToolContext, path: str) -> tuple[Workspace, str]:
        return sent_file(self._attachments(ctx), path)

    # ------------------------------------------------------------------ /workspace

    def register_commands(self, registry: CommandRegistry) -> None:
        registry.command("workspace", "Size of this conversation's workspace; /workspace reset empties it "
                         "(admins)")(self.handle_command)

    async def handle_command(self, ctx: CommandContext) -> str:
        scope = ctx.session.scope
        ws = await asyncio.to_thread(self.workspace_for, chat_kind=scope.chat_kind, person_id=ctx.person_id,
                                     session_key=ctx.session.key)
        if ctx.args.strip() == "reset":
            if not ctx.is_admin:
                return "Only an admin of this bot can reset a workspace."
            await asyncio.to_thread(ws.reset)
            return "The workspace is empty now."
        used = await asyncio.to_thread(ws.size)
        return f"Workspace: {used / MB:.2f} MB used of {ws.quota_bytes / MB:.0f} MB."


__all__ = ["WorkspaceFeature"]
