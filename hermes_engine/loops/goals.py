"""/goal: a standing goal pursued turn after turn, judged after each one.

Continuations are plain user messages ("[Continuing toward your goal] …") that go through the gateway's
durable inbox like anything a person says, so the prompt prefix stays cached, a person's own message is
answered first (it is already queued), and a restart neither loses nor repeats a turn.

With several replicas, a continuation is idempotent by its message id (`goal-<id>-<n>`: the inbox keeps
one), and the step between two turns (counting the last one, judging it, queueing the next) runs under
the lease `goal:<id>`. Every replica looks for active goals whose lease is free now and then and queues their
next turn: a duplicate when it is queued already, the goal going on when its replica died mid-judgement.
"""

from __future__ import annotations

import asyncio
import contextlib
import hashlib
import json
import logging
import re
from dataclasses import replace
from typing import TYPE_CHECKING, Any

from hermes_engine.agent.long_answers import answer_text
from hermes_engine.config import GoalSettings
from hermes_engine.errors import HermesError, ProviderError
from hermes_engine.loops.goal_actions import clear_goal, pause_goal
from hermes_engine.policy.limits import SERVICE as LIMITS
from hermes_engine.policy.limits import UsageLimits, charge
from hermes_engine.ports.commands import CommandContext, CommandRegistry
from hermes_engine.ports.conversation import Message, Usage
from hermes_engine.ports.feature import Feature, TurnOutcome
from hermes_engine.ports.inbound import InboundMessage, ReplyTarget, message_from_payload, message_to_payload
from hermes_engine.ports.leases import goal_lease
from hermes_engine.ports.models import Completed, ModelRequest
from hermes_engine.ports.session import SessionScope
from hermes_engine.ports.storage import GoalRecord

if TYPE_CHECKING:
    from hermes_engine.ports.host import Host

log = logging.getLogger(__name__)

JUDGE_WINDOW_CHARS = 4000
MAX_GARBAGE_IN_A_ROW = 3
MAX_TRANSPORT_FAILURES = 5
REPEATS_TO_PAUSE = 3
CONTINUE_PREFIX = "[Continuing toward your goal]"

JUDGE_SYSTEM = """\
You judge progress toward a goal. You get the goal and the latest answer of the assistant working on it.
Reply with exactly one line of JSON and nothing else:
{"verdict": "done" | "continue" | "blocked", "reason": "<one short sentence>"}
"done": the goal is fully achieved. "blocked": it cannot go on without the person (missing information,
access, a decision). "continue": progress is possible without the person."""

USAGE = ("Usage: /goal <what you want done> — I keep working on it until it is done.\n"
         "Also: /goal status | pause | resume | clear")

_JSON_OBJECT = re.compile(r"\{.*?\}", re.S)
GOAL_MESSAGE_ID = re.compile(r"goal-(\d+)-(\d+)(?:-r\d+)?")


def parse_verdict(text: str) -> dict[str, str] | None:
    """The judge's one line of JSON, or None for anything else (prose, bad verdicts)."""
    text = text.strip()
    candidates = [text] + _JSON_OBJECT.findall(text)
    for candidate in candidates:
        try:
            data = json.loads(candidate)
        except (json.JSONDecodeError, TypeError):
            continue
        if isinstance(data, dict) and data.get("verdict") in ("done", "continue", "blocked"):
            return {"verdict": data["verdict"], "reason": str(data.get("reason", ""))[:500]}
    return None


def _turn_number(message_id: str) -> int:
    """n of a goal turn's message id `goal-<id>-<n>[-r<resumes>]`; 0 for any other id."""
    match = GOAL_MESSAGE_ID.fullmatch(message_id)
    return int(match.group(2)) if match else 0


def _fingerprint(text: str) -> str:
    return hashlib.sha256(" ".join(text.split()).lower().encode()).hexdigest()[:16]


class GoalFeature(Feature):
    name = "goals"

    def __init__(self, settings: GoalSettings) -> None:
        self.settings = settings
        self.host: Host | None = None
        self._garbage: dict[int, int] = {}
        self._transport: dict[int, int] = {}
        self._watch: asyncio.Task[None] | None = None
        self._judging: set[int] = set()  # goals between two turns on this replica

    # ------------------------------------------------------------------ lifecycle

    async def start(self, host: Host) -> None:
        self.host = host
        await self.resume_orphans()  # a turn that was in flight is replayed by the inbox instead
        self._watch = asyncio.create_task(self._keep_resuming(), name="goals-resume")

    async def stop(self) -> None:
        if self._watch is not None:
            self._watch.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._watch

    async def resume_orphans(self) -> None:
        """Queue the next turn of every active goal no replica is between turns of (its lease is free): a
        duplicate of the turn queued already, or the next one when the replica judging the last died."""
        assert self.host is not None
        for goal in await self.host.store.list_goals("active", bot=self.host.bot):
            if goal.id in self._judging:
                continue
            async with self.host.leases.held(goal_lease(goal.id)) as ours:
                current = await self.host.store.get_goal(goal.id) if ours else None
                if current is not None and current.status == "active":
                    await self._go_on(current)

    async def _go_on(self, goal: GoalRecord) -> None:
        """Queue the goal's next turn (a duplicate, dropped, when it is queued already). A turn answered but
        never counted, its replica dead before the judge, is judged on its stored answer instead, in the
        background as after a turn here: queued again it would be dropped as answered and the goal stall."""
        assert self.host is not None
        message = self._turn_message(goal)
        if await self._queued(goal, message):
            return  # its turn is still to come; handing it in again would only be dropped as a duplicate
        if await self.host.handle(message, purpose="goal"):
            return
        if await self._queued(goal, message):
            return
        answer, tokens = await self._stored_turn(goal, message.event_id)
        log.info("goal %s: turn %s was answered but not judged; judging it now", goal.id, goal.turns_used + 1)
        self._judging.add(goal.id)
        self.host.spawn(self._judged(goal.id, message.message_id, answer, tokens), f"goal-judge:{goal.id}")

    async def _queued(self, goal: GoalRecord, message: InboundMessage) -> bool:
        """Whether the inbox holds `message` unanswered: the goal's turn is queued or running now."""
        assert self.host is not None
        pending = await self.host.store.pending_inbound(message.platform, session_key=goal.session_key)
        return any(event.event_id == message.event_id for event in pending)

    async def _stored_turn(self, goal: GoalRecord, event_id: str) -> tuple[str, int]:
        """The final answer and the tokens of the goal turn that answered `event_id`, as its session stored
        them: the messages after its user message, up to the next one ("" and 0 when it is not there). The
        turn ran in the conversation's current session, or in the goal's own (before a `/new`)."""
        store = self.host.store  # type: ignore[union-attr]
        current = await store.active_session(goal.session_key, goal.bot)
        for session_id in dict.fromkeys(i for i in (current.id, goal.session_id) if i is not None):
            stored = await store.load_stored_messages(session_id)
            start = next((i for i, m in enumerate(stored)
                          if m.message.role == "user" and m.message.meta.get("event_id") == event_id), None)
            if start is None:
                continue
            after = stored[start + 1:]
            end = next((i for i, m in enumerate(after) if m.message.role == "user"), len(after))
            turn = after[:end]
            last = next((i for i in range(len(turn) - 1, -1, -1)
                         if turn[i].message.role == "assistant" and turn[i].message.content), None)
            answer = answer_text([m.message for m in turn[:last + 1]]) if last is not None else ""
            return answer, sum(m.usage.total for m in turn if m.usage is not None)
        return "", 0

    async def _keep_resuming(self) -> None:
        assert self.host is not None
        while True:
            await asyncio.sleep(self.host.leases.renew_every)
            try:
                await self.resume_orphans()
            except Exception as exc:  # noqa: BLE001 - the store may be down; the next round tries again
                log.warning("could not look for goals to resume: %s", exc)

    def register_commands(self, registry: CommandRegistry) -> None:
        registry.command("goal", "work on a goal across turns: /goal <text> | status | pause | resume | clear",
                         immediate=True)(self._command)

    async def status_lines(self, scope: SessionScope, person_id: int | None) -> list[str]:
        assert self.host is not None
        goal = await self.host.store.active_goal(scope.session_key, self.host.bot)
        return [f"Goal: {goal.text} ({goal.status}, {goal.turns_used} turns)"] if goal else []

    # ------------------------------------------------------------------ commands

    async def _command(self, ctx: CommandContext) -> str | None:
        store = ctx.host.store
        key, bot = ctx.session.key, ctx.host.bot
        word, _, rest = ctx.args.partition(" ")
        sub = word.lower()
        goal = await store.active_goal(key, bot)
        if not ctx.args.strip():
            return USAGE
        if sub == "status":
            latest = goal or next(iter(sorted(await store.list_goals(bot=bot, session_key=key),
                                              key=lambda g: g.id, reverse=True)), None)
            return self._status(latest) if latest else "No goal in this conversation. " + USAGE
        if sub == "pause":
            if await pause_goal(store, goal) is None:
                return "No running goal to pause."
            return "Goal paused. /goal resume picks it up again."
        if sub == "resume":
            if goal is None:
                return "No open goal to resume. " + USAGE
            if goal.status == "active":
                return "The goal is already running."
            # A continuation turned away while paused is in the inbox as answered: the resumed one is new.
            resumes = int((goal.target or {}).get("resumes", 0)) + 1
            goal = await store.update_goal(goal.id, status="active", session_id=ctx.session.record.id,
                                           target={**(goal.target or {}), "resumes": resumes})
            if goal is None:  # cleared meanwhile
                return "No open goal to resume. " + USAGE
            self._garbage.pop(goal.id, None)
            self._transport.pop(goal.id, None)
            await self._submit_turn(goal)
            return f"Resuming the goal: {goal.text}"
        if sub == "clear":
            if await clear_goal(store, goal) is None:
                return "No goal to clear."
            return "Goal cleared."
        if goal is not None and goal.status == "active":
            return (f"A goal is already running here: “{goal.text}”. Clear it first with /goal clear "
                    "(or pause it with /goal pause).")
        text = ctx.args.strip()
        target = {"message": message_to_payload(ctx.message), "reply": ctx.message.reply_target().to_dict()}
        goal = await store.create_goal(key, bot, text, session_id=ctx.session.record.id, target=target)
        await self._submit_turn(goal)
        return f"🎯 Goal set: {text}\nI will work on it turn by turn and tell you when it is done."

    @staticmethod
    def _status(goal: GoalRecord) -> str:
        lines = [f"Goal: {goal.text}", f"Status: {goal.status}",
                 f"Turns used: {goal.turns_used}", f"Tokens spent: {goal.tokens_used}"]
        if goal.verdicts:
            lines.append("Verdicts:")
            for i, v in enumerate(goal.verdicts[-10:], start=max(1, len(goal.verdicts) - 9)):
                lines.append(f"{i}. {v.get('verdict', '?')}: {v.get('reason', '')}")
        return "\n".join(lines)

    # ------------------------------------------------------------------ turns

    def _turn_message(self, goal: GoalRecord) -> InboundMessage:
        original = message_from_payload(goal.target["message"])
        n = goal.turns_used + 1
        text = goal.text if n == 1 else f"{CONTINUE_PREFIX} {goal.text}"
        resumes = int(goal.target.get("resumes", 0))
        message_id = f"goal-{goal.id}-{n}" + (f"-r{resumes}" if resumes else "")
        return replace(original, text=text, message_id=message_id, synthetic=True,
                       command=None, args="", attachments=(), reply_to_id=None)

    async def _submit_turn(self, goal: GoalRecord) -> None:
        assert self.host is not None
        await self.host.handle(self._turn_message(goal), purpose="goal")

    async def accept_turn(self, message: InboundMessage, purpose: str) -> bool:
        """A goal's turn runs while the goal is active and the person's usage limits let it (it is counted
        as one of their turns); over a limit the goal pauses and says so, instead of going on."""
        if purpose != "goal" or self.host is None:
            return True
        goal = await self._goal_of(message)
        if goal is None or goal.status != "active":
            return False
        limits: UsageLimits | None = self.host.services.get(LIMITS)
        refused = await limits.refusal(message) if limits is not None else None
        if refused is not None:
            await self._pause(goal, refused.rstrip("."))
            return False
        return True

    async def _charge(self, goal: GoalRecord, spent: Usage) -> None:
        """What was spent on the goal outside its turns (its judge) is its person's: who set it (after a
        /link, the person they are now)."""
        assert self.host is not None
        message = message_from_payload(goal.target["message"])
        person = await self.host.person_of(message.platform, message.account, message.user_id, message.user_name)
        await charge(self.host, person, spent)

    async def _goal_of(self, message: InboundMessage) -> GoalRecord | None:
        match = GOAL_MESSAGE_ID.fullmatch(message.message_id)
        return await self.host.store.get_goal(int(match.group(1))) if match and self.host else None

    async def on_stop(self, scope: SessionScope) -> None:
        assert self.host is not None
        goal = await self.host.store.active_goal(scope.session_key, self.host.bot)
        if goal is not None and goal.status == "active":
            await self.host.store.update_goal(goal.id, status="paused")

    async def on_turn_end(self, outcome: TurnOutcome) -> None:
        if outcome.purpose != "goal" or self.host is None:
            return
        goal = await self.host.store.active_goal(outcome.scope.session_key, self.host.bot)
        if goal is None:
            return
        self._judging.add(goal.id)  # from now: the watch here leaves it alone
        self.host.spawn(self._judged(goal.id, outcome.message_id, outcome.final_text, outcome.usage.total),
                        f"goal-judge:{goal.id}")

    async def _judged(self, goal_id: int, message_id: str, answer: str, tokens: int) -> None:
        """Count, judge and go on under the goal's lease. A replica looking for orphaned goals meanwhile
        finds the lease held, or the turn not counted yet (and queues a duplicate of it, which the inbox
        drops); a turn counted outside the lease would let it queue the next turn before this one is judged."""
        assert self.host is not None
        try:
            async with self.host.leases.held(goal_lease(goal_id), wait=True):
                goal, number = await self.host.store.get_goal(goal_id), _turn_number(message_id)
                if goal is None or (number and goal.turns_used >= number):
                    return  # counted and judged already (a replica that found it answered but not judged)
                # Count the turn before judging it: whatever happens next (a pause, a restart), the next
                # continuation has a new number and this turn is never run again.
                goal = await self.host.store.update_goal(goal_id, add_turns=1, add_tokens=tokens)
                if goal is not None and goal.status == "active":
                    await self._after_turn(goal, answer)
        finally:
            self._judging.discard(goal_id)

    async def _after_turn(self, goal: GoalRecord, answer: str) -> None:
        assert self.host is not None
        store = self.host.store
        verdict, judge_usage, transport_failed = await self._judge(goal, answer)
        self.host.spawn(self._charge(goal, judge_usage), "usage-tokens")
        if transport_failed:
            failures = self._transport[goal.id] = self._transport.get(goal.id, 0) + 1
        else:
            self._transport[goal.id] = 0
            failures = 0
        garbage = verdict is None and not transport_failed
        streak = self._garbage[goal.id] = (self._garbage.get(goal.id, 0) + 1) if garbage else 0
        entry = verdict or {"verdict": "continue", "reason": "the judge gave no usable answer"}
        entry = {**entry, "answer": _fingerprint(answer)}
        updated = await store.update_goal(goal.id, add_tokens=judge_usage.total, verdict=entry)
        if updated is None or updated.status != "active":
            return
        goal = updated
        recent = [v.get("answer") for v in goal.verdicts[-REPEATS_TO_PAUSE:]]
        if entry["verdict"] == "done":
            await store.update_goal(goal.id, status="done")
            await self._post(goal, f"✅ Goal done: {goal.text}\n{entry['reason']}".rstrip())
        elif entry["verdict"] == "blocked":
            await store.update_goal(goal.id, status="blocked")
            await self._post(goal, f"⛔ I am stuck on the goal: {entry['reason']}\n"
                                   "Answer here, then /goal resume (or /goal clear).")
        elif failures >= MAX_TRANSPORT_FAILURES:
            await self._pause(goal, f"the judge model could not be reached {failures} times in a row")
        elif streak >= MAX_GARBAGE_IN_A_ROW:
            await self._pause(goal, f"the judge answered {streak} times in a row with something that was not "
                                    "a verdict")
        elif len(recent) == REPEATS_TO_PAUSE and len(set(recent)) == 1:
            await self._pause(goal, f"my last {REPEATS_TO_PAUSE} answers were the same, so I am going in circles")
        elif goal.turns_used >= self.settings.max_turns:
            await self._pause(goal, f"the budget of {self.settings.max_turns} turns is spent", summary=True)
        else:
            await self._submit_turn(goal)

    async def _pause(self, goal: GoalRecord, why: str, summary: bool = False) -> None:
        await self.host.store.update_goal(goal.id, status="paused")  # type: ignore[union-attr]
        text = f"⏸ Goal paused: {why}.\nGoal: {goal.text}\nTurns used: {goal.turns_used}"
        if summary:
            reasons = [v.get("reason", "") for v in goal.verdicts if v.get("reason")]
            if reasons:
                text += "\nProgress so far:\n" + "\n".join(f"- {r}" for r in reasons[-5:])
        await self._post(goal, text + "\n/goal resume to go on, /goal clear to drop it.")

    async def tell_changed_by_admin(self, goal: GoalRecord) -> None:
        """An admin paused or cleared `goal` (as it is now) elsewhere, on the dashboard: the conversation that
        set it learns it where it would look, as it learns of a pause the goal's own judge made."""
        if goal.status == "paused":
            text = (f"⏸ Goal paused by an admin.\nGoal: {goal.text}\nTurns used: {goal.turns_used}\n"
                    "/goal resume to go on, /goal clear to drop it.")
        elif goal.status == "cleared":
            text = f"Goal cleared by an admin.\nGoal: {goal.text}\nTurns used: {goal.turns_used}"
        else:
            return
        await self._post(goal, text, key=f"goal-{goal.id}-admin-{goal.status}-{goal.updated_at.isoformat()}")

    async def _post(self, goal: GoalRecord, text: str, *, key: str | None = None) -> None:
        host = self.host
        assert host is not None
        target = ReplyTarget.from_dict(goal.target["reply"])
        target = replace(target, reply_to_id=None)
        key = key or f"goal-{goal.id}-{goal.turns_used}-{goal.status}"
        if not await host.notify(target, text, idempotency_key=key):
            log.warning("goal %s: no %s outlet to post to", goal.id, target.platform)

    async def _judge(self, goal: GoalRecord, answer: str) -> tuple[dict[str, str] | None, Usage, bool]:
        """Ask the judge; retry once on garbage. Returns (verdict or None, usage, transport failed)."""
        host = self.host
        assert host is not None
        session = host.session(goal.session_key)
        if self.settings.judge_model:
            chain = host.chain([self.settings.judge_model])
        elif session is not None:
            chain = host.chain_for(session)  # the session's own model (a /model switch included)
        else:
            chain = host.chain(host.profile.models(host.settings))
        request = ModelRequest(
            system=JUDGE_SYSTEM, max_tokens=200, purpose="judge",
            messages=(Message(role="user", content=f"Goal: {goal.text}\n\nLatest answer (last "
                                                    f"{JUDGE_WINDOW_CHARS} characters):\n"
                                                    f"{answer[-JUDGE_WINDOW_CHARS:]}"),))
        usage = Usage()
        try:
            for _attempt in range(2):
                text = ""
                async for event in chain.route().stream(request):
                    if isinstance(event, Completed):
                        text = event.response.text
                        usage.add(event.response.usage)
                verdict = parse_verdict(text)
                if verdict is not None:
                    return verdict, usage, False
                log.warning("goal %s: judge answered garbage: %r", goal.id, text[:200])
            return None, usage, False
        except (ProviderError, HermesError) as exc:
            log.warning("goal %s: judge call failed: %s", goal.id, exc)
            return None, usage, True


def goal_summary(goal: GoalRecord) -> dict[str, Any]:
    return {"id": goal.id, "text": goal.text, "status": goal.status, "turns": goal.turns_used}
