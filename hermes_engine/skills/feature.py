"""`SkillsFeature`: wires the skill library into the engine.

- tools: skill_view, skills_list, skill_manage (toolset "skills"); they reach the library through
  `ctx.services` under `SKILLS` (this feature, which serves one library per bot).
- prompt: a frozen compact index per session (`frozen_section`) and a per-message hint (`turn_note`).
- usage: `on_turn_end` records which skills a turn loaded and how the turn ended.
- commands: `/skills` (list; admins: pending, approve, reject), `/curator` (admins), and every skill as
  `/<skill-name>` through `skill_command`, which the gateway calls for unknown commands.
- scheduling: the curator runs weekly under a store lease (one replica).
"""

from __future__ import annotations

import asyncio
import json
import logging
import re
from collections import Counter, OrderedDict
from collections.abc import Callable
from datetime import datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any

from hermes_engine.ports.commands import CommandContext, CommandRegistry
from hermes_engine.ports.embedding import Embedder
from hermes_engine.ports.feature import Feature, TurnOutcome
from hermes_engine.ports.models import Provider
from hermes_engine.ports.prompt import PromptContributor
from hermes_engine.ports.services import ServiceKey
from hermes_engine.ports.session import SessionScope
from hermes_engine.ports.storage import SkillEmbeddingCache
from hermes_engine.ports.tools import Tool
from hermes_engine.skills.curator import Curator, latest_report
from hermes_engine.skills.hints import SkillHints
from hermes_engine.skills.index import hint_text, render_index
from hermes_engine.skills.library import (
    ChangeResult,
    FileSkillLibrary,
    GatedLibrary,
    PendingChange,
    PendingQueue,
    SkillLibrary,
    bot_library_dir,
)
from hermes_engine.skills.model import NAME_RE, SkillError
from hermes_engine.skills.tools import SKILLS, TOOLS
from hermes_engine.skills.usage import UsageLog, describe, ranked, utcnow

if TYPE_CHECKING:
    from hermes_engine.ports.host import Host

log = logging.getLogger(__name__)

WEEK = 7 * 86400
SKILL_PREFIX = re.compile(r"^Use the skill ([a-z0-9][a-z0-9-]{0,63}):\n")
CORRECTION = re.compile(
    r"^\W*(?:no+|nope|wrong)\b[\s,.!]*(?:that|this|it)?|"
    r"\b(?:that'?s|that is|this is|it'?s|you'?re)\s+(?:wrong|not right|incorrect|not what i)|"
    r"\b(?:that|this|it)\s+(?:didn'?t|did not|doesn'?t|does not)\s+work|"
    r"\b(?:still|it'?s still)\s+(?:broken|failing|not working)|"
    r"\bnot what i (?:asked|wanted|meant)\b|\byou (?:got it|misunderstood)\b",
    re.I)
_CACHE_SESSIONS = 2048


class SkillsFeature(Feature, PromptContributor):
    """Skills for one or more bot profiles, each with its library at `<skills_root>/<bot>/`."""

    name = "skills"

    def __init__(self, skills_root: Path | str, *, bot: str = "default",
                 provider: Provider | Callable[[], Provider | None] | None = None,
                 require_approval: bool = False, curator_interval_seconds: float | None = WEEK,
                 stale_days: int = 14, archive_days: int = 30, llm_pass: bool = True, hint_limit: int = 3,
                 clock: Callable[[], datetime] = utcnow, embedder: Embedder | None = None,
                 library_factory: Callable[[str], FileSkillLibrary] | None = None) -> None:
        """`skills_root` is `<HERMES_HOME>/skills`; `bot` the default profile (commands, CLI).
        `library_factory(bot)` makes a bot's library when it is not the folder under `skills_root` (the
        database's, `skills.database`).
        `provider` (or a factory returning one) serves the curator's LLM pass; None turns that pass off.
        `require_approval` queues every agent write for an admin (shared bots).
        `curator_interval_seconds=None` leaves the curator to the CLI and `/curator`; otherwise it runs on the
        host's schedule, on one replica per interval.
        `embedder` fuses embedding similarity into hints (vectors cached in the store); None: lexical only."""
        self.root = Path(skills_root)
        self.bot = bot
        self._provider = provider
        self.require_approval = require_approval
        self.curator_interval = curator_interval_seconds
        self.stale_days = stale_days
        self.archive_days = archive_days
        self.llm_pass = llm_pass
        self.hint_limit = hint_limit
        self.clock = clock
        self._libraries: dict[str, FileSkillLibrary] = {}
        self._gated: dict[str, GatedLibrary] = {}
        self._usage: dict[str, UsageLog] = {}
        self._curators: dict[str, Curator] = {}
        self.embedder = embedder
        self.library_factory = library_factory
        self._embedding_cache: SkillEmbeddingCache | None = None
        self._rankers: dict[str, tuple[str, SkillHints]] = {}
        self._frozen: OrderedDict[tuple[str, int], str] = OrderedDict()
        self._last_used: OrderedDict[tuple[str, int], list[str]] = OrderedDict()
        self._seen_revision: dict[str, str] = {}  # per bot: the library revision the last turn saw
        self._known: dict[str, set[str]] = {}  # per bot: skills this process has seen in the library
        self._plain_calls: dict[str, int] = {}  # most tool calls of a skill-less turn since the library changed
        self._background: set[asyncio.Task[Any]] = set()
        self._tool_names: frozenset[str] | None = None  # the bot's tools, known once started
        self._skill_tools: dict[str, dict[str, tuple[str, ...]]] = {}  # per bot: the tools each skill names

    @classmethod
    def from_settings(cls, settings: Any, bot: str = "default", **options: Any) -> SkillsFeature:
        return cls(Path(settings.home) / "skills", bot=bot, **options)

    # ------------------------------------------------------------------ libraries
    def raw_library(self, bot: str | None = None) -> FileSkillLibrary:
        bot = bot or self.bot
        if bot not in self._libraries:
            self._libraries[bot] = (self.library_factory(bot) if self.library_factory is not None
                                    else FileSkillLibrary(bot_library_dir(self.root, bot)))
        return self._libraries[bot]

    def library_for(self, bot: str | None = None) -> SkillLibrary:
        """The library the agent's tools write to (through the approval queue when required)."""
        library = self.raw_library(bot)
        if not self.require_approval:
            return library
        key = bot or self.bot
        if key not in self._gated:
            self._gated[key] = GatedLibrary(library)
        return self._gated[key]

    def pending_for(self, bot: str | None = None) -> PendingQueue:
        return PendingQueue(self.raw_library(bot).root)

    async def approve(self, bot: str, pending_id: str) -> ChangeResult:
        """An admin's approval of a held change (`/skills approve`, the dashboard): applied, as its author, to
        the ungated library; raises `SkillError` when there is no such change or it cannot be applied."""
        return await self.pending_for(bot).approve(pending_id, self.raw_library(bot))

    def reject(self, bot: str, pending_id: str) -> PendingChange:
        """An admin's rejection (`/skills reject`, the dashboard): the change is dropped unapplied."""
        return self.pending_for(bot).reject(pending_id)

    def usage_for(self, bot: str | None = None) -> UsageLog:
        bot = bot or self.bot
        if bot not in self._usage:
            self._usage[bot] = UsageLog.for_library(self.raw_library(bot).root)
        return self._usage[bot]

    def provider(self) -> Provider | None:
        p = self._provider
        if p is None or isinstance(p, Provider):
            return p
        return p() if callable(p) else None

    def curator_for(self, bot: str | None = None) -> Curator:
        bot = bot or self.bot
        if bot not in self._curators:
            self._curators[bot] = Curator(self.raw_library(bot), self.usage_for(bot), self.provider(),
                                          stale_days=self.stale_days, archive_days=self.archive_days,
                                          llm_pass=self.llm_pass, clock=self.clock, bot=bot)
        return self._curators[bot]

    def bots(self) -> list[str]:
        """Bots with a library on disk (plus the default one)."""
        found = {self.bot}
        if self.root.is_dir():
            found.update(p.name for p in self.root.iterdir() if p.is_dir() and not p.name.startswith("."))
        return sorted(found)

    # ------------------------------------------------------------------ Feature
    def tools(self) -> list[Tool]:
        return list(TOOLS)

    def services(self) -> dict[ServiceKey[Any], object]:
        return {SKILLS: self}

    def contributors(self) -> list[Any]:
        return [self]

    def tool_names(self) -> frozenset[str] | None:
        return self._tool_names

    async def start(self, host: Host) -> None:
        self._embedding_cache = host.store
        self._tool_names = frozenset(t.name for t in host.tools)
        if self.curator_interval:
            host.schedule(f"skills-curator:{self.bot}", self.curator_interval, self.run_curators)

    async def stop(self) -> None:
        for task in list(self._background):
            task.cancel()
        await asyncio.gather(*self._background, return_exceptions=True)

    async def run_curators(self) -> None:
        """The scheduled job: one curator run for this feature's bot."""
        await self.curator_for(self.bot).run()

    # ------------------------------------------------------------------ prompt
    async def frozen_section(self, scope: SessionScope) -> str | None:
        key = (scope.bot, scope.session_id)
        if key not in self._frozen:
            skills = await self.library_for(scope.bot).list_skills()
            self._frozen[key] = render_index(skills)
            while len(self._frozen) > _CACHE_SESSIONS:
                self._frozen.popitem(last=False)
        return self._frozen[key]

    async def ranker(self, bot: str | None = None) -> SkillHints:
        bot = bot or self.bot
        library = self.library_for(bot)
        revision = await library.revision()
        cached = self._rankers.get(bot)
        if cached is None or cached[0] != revision:
            skills = await library.list_skills()
            self._skill_tools[bot] = {s.name: s.tools for s in skills}
            if cached is None:
                cached = (revision, SkillHints(skills, embedder=self.embedder, cache=self._embedding_cache))
            else:
                cached[1].rebuild(skills)
                cached = (revision, cached[1])
            self._rankers[bot] = cached
        return cached[1]

    async def turn_note(self, scope: SessionScope, speaker_person_id: int | None, text: str) -> str | None:
        if not text or not text.strip() or SKILL_PREFIX.match(text):
            return None
        ranker = await self.ranker(scope.bot)
        hits = await ranker.hints(text, limit=self.hint_limit + 2)
        tools = self._skill_tools.get(scope.bot, {})
        have = self._tool_names
        usable = [h for h in hits if have is None or all(t in have for t in tools.get(h.name, ()))]
        return hint_text(usable[:self.hint_limit], tools)

    def on_session_evicted(self, scope: SessionScope) -> None:
        self._frozen.pop((scope.bot, scope.session_id), None)
        self._last_used.pop((scope.bot, scope.session_id), None)

    # ------------------------------------------------------------------ skills as commands
    async def expand_command(self, name: str, args: str, bot: str) -> str | None:
        return await self.skill_command(name, args, bot=bot)

    async def skill_command(self, name: str, args: str = "", *, bot: str | None = None) -> str | None:
        """The user message for `/<skill-name> args`, or None when no such skill exists.
        (Telegram commands cannot hold hyphens, so `/docker_build_cache` finds `docker-build-cache`.)"""
        name = (name or "").strip().lstrip("/").lower().replace("_", "-")
        if not NAME_RE.match(name):
            return None
        skill = await self.library_for(bot).get(name)
        if skill is None:
            return None
        text = f"Use the skill {skill.name}:\n{skill.text.strip()}"
        return f"{text}\n\n{args.strip()}" if args and args.strip() else text

    # ------------------------------------------------------------------ usage
    @staticmethod
    def skills_used(outcome: TurnOutcome) -> Counter[str]:
        """skill_view calls in the turn, plus a skill loaded by `/<skill-name>`."""
        used: Counter[str] = Counter()
        first_user = True
        for message in outcome.new_messages:
            if message.role == "user" and first_user:
                first_user = False
                m = SKILL_PREFIX.match(message.content or "")
                if m:
                    used[m.group(1)] += 1
            if message.role != "assistant":
                continue
            for call in message.tool_calls:
                if call.name != "skill_view":
                    continue
                try:
                    name = json.loads(call.arguments or "{}").get("name")
                except (ValueError, AttributeError):
                    continue
                if isinstance(name, str) and NAME_RE.match(name):
                    used[name] += 1
        return used

    async def on_turn_end(self, outcome: TurnOutcome) -> None:
        bot = outcome.scope.bot
        key = (bot, outcome.scope.session_id)
        try:
            library = self.library_for(bot)
            used = Counter({n: c for n, c in self.skills_used(outcome).items() if await library.get(n) is not None})
            usage = self.usage_for(bot)
            user_text = next((m.content for m in outcome.new_messages if m.role == "user"), "")
            previous = self._last_used.pop(key, None)
            if previous and user_text and CORRECTION.search(user_text):
                await asyncio.to_thread(usage.record_correction, previous, self.clock())
            calls = [c.name for m in outcome.new_messages if m.role == "assistant" for c in m.tool_calls]
            plain = 0 if used else len(calls)
            wrote = "skill_manage" in calls  # a skill written in this turn was learned from this turn's work
            if wrote:
                self._plain_calls[bot] = max(self._plain_calls.get(bot, 0), plain)
            self._note_new_skills(bot, library, usage)
            if not wrote:
                self._plain_calls[bot] = max(self._plain_calls.get(bot, 0), plain)
            if used:
                failed = outcome.failed and not outcome.interrupted
                await asyncio.to_thread(usage.record_turn, dict(used), failed=failed, at=self.clock(),
                                        calls=len(calls), tokens=outcome.usage.total)
                self._last_used[key] = sorted(used)
                while len(self._last_used) > _CACHE_SESSIONS:
                    self._last_used.popitem(last=False)
        except Exception:  # usage is bookkeeping: never let it break a turn
            log.warning("skills: recording usage failed", exc_info=True)

    def _note_new_skills(self, bot: str, library: SkillLibrary, usage: UsageLog) -> None:
        """When the library changed since the last turn (the hint ranker saw a new revision), the skills new to
        this process take the baseline of the skill-less work done since; listed off the turn's path."""
        cached = self._rankers.get(bot)
        if cached is None or self._seen_revision.get(bot) == cached[0]:
            return
        first = bot not in self._seen_revision  # what exists at start was not learned here
        self._seen_revision[bot] = cached[0]
        baseline, self._plain_calls[bot] = (0 if first else self._plain_calls.get(bot, 0)), 0
        task = asyncio.create_task(self._adopt(bot, library, usage, baseline))
        self._background.add(task)
        task.add_done_callback(self._background.discard)

    async def _adopt(self, bot: str, library: SkillLibrary, usage: UsageLog, baseline: int) -> None:
        try:
            names = {s.name for s in await library.list_skills()}
            known = self._known.setdefault(bot, set())
            new = sorted(names - known)
            known |= names
            if new and baseline:
                await asyncio.to_thread(usage.set_baseline, new, baseline)
        except Exception:  # bookkeeping, like the rest of usage
            log.warning("skills: recording the baseline of new skills failed", exc_info=True)

    async def status_lines(self, scope: SessionScope, person_id: int | None) -> list[str]:
        skills = await self.library_for(scope.bot).list_skills()
        if not skills:
            return ["Skills: none saved yet"]
        usages = await asyncio.to_thread(self.usage_for(scope.bot).all)
        rows = ranked(usages, [s.name for s in skills])
        shown = [r for r in rows if r[1].turns][:5]
        lines = [f"Skills: {len(skills)} saved, {sum(1 for r in rows if r[1].turns)} used"]
        lines += [f"- {describe(n, u)}" for n, u in shown]
        return lines

    # ------------------------------------------------------------------ commands
    def _bot_of(self, ctx: CommandContext) -> str:
        session = ctx.session  # None when a command is run outside a session (tests, the CLI)
        for value in (session.scope.bot if session is not None else None,
                      ctx.host.bot if ctx.host is not None else None):
            if isinstance(value, str) and value:
                return value
        return self.bot

    def register_commands(self, registry: CommandRegistry) -> None:
        registry.command("skills", "List skills; admins: /skills pending | approve <id> | reject <id>")(
            self._skills_command)
        registry.command("curator", "Skill curator: /curator run [dry-run] | report", admin_only=True)(
            self._curator_command)

    async def _skills_command(self, ctx: CommandContext) -> str:
        bot = self._bot_of(ctx)
        words = ctx.args.split()
        sub = words[0].lower() if words else "list"
        if sub in ("pending", "approve", "reject"):
            if not ctx.is_admin:
                return "Only an admin of this bot can review pending skill changes."
            queue = self.pending_for(bot)
            if sub == "pending":
                entries = queue.list()
                if not entries:
                    return "No pending skill changes."
                return "Pending skill changes:\n" + "\n".join(f"- {e.describe()}" for e in entries) + \
                    "\n\nApprove with /skills approve <id>, reject with /skills reject <id>."
            if len(words) < 2:
                return f"Usage: /skills {sub} <id> (see /skills pending)."
            try:
                if sub == "approve":
                    result = await self.approve(bot, words[1])
                    return f"Approved {words[1]}: {result.text()}"
                entry = self.reject(bot, words[1])
                return f"Rejected {entry.id} ({entry.change.summary()})."
            except SkillError as exc:
                return f"Could not {sub} {words[1]}: {exc}"
        category = words[1] if sub == "list" and len(words) > 1 else (None if sub == "list" else words[0])
        skills = await self.raw_library(bot).list_skills(category)
        if not skills:
            return "No skills saved yet." if not category else f"No skills in category {category!r}."
        lines = [f"{len(skills)} skill(s) — run one with /<name>:"]
        current = None
        for s in skills:
            if s.category != current:
                current = s.category
                lines.append(f"\n*{current}*")
            lines.append(f"- /{s.name} — {s.description}")
        return "\n".join(lines)

    async def _curator_command(self, ctx: CommandContext) -> str:
        bot = self._bot_of(ctx)
        words = ctx.args.lower().split()
        sub = words[0] if words else "report"
        if sub == "run":
            dry = any(w in ("dry-run", "--dry-run", "dry") for w in words[1:])
            task = asyncio.create_task(self.curator_for(bot).run(dry_run=dry))
            self._background.add(task)
            task.add_done_callback(self._background.discard)
            try:
                report = await asyncio.wait_for(asyncio.shield(task), timeout=60)
            except TimeoutError:
                return "The curator is still running; see /curator report in a while."
            except Exception as exc:
                return f"The curator failed: {exc}. The library is unchanged since the backup."
            return f"{report.summary()}\nReport: {report.files.get('markdown', '')}"
        if sub == "report":
            latest = latest_report(self.raw_library(bot).root)
            if latest is None:
                return "The curator has not run yet. Start it with /curator run (or /curator run dry-run)."
            return latest.to_markdown()[:3500]
        return "Usage: /curator run [dry-run] | /curator report"


__all__ = ["SkillsFeature"]
