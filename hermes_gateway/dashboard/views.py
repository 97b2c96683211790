"""What the pages show, gathered from the engine's ports: nothing here knows how or where it is stored."""

from __future__ import annotations

from collections import Counter
from collections.abc import Awaitable, Callable, Mapping, Sequence
from dataclasses import KW_ONLY, dataclass, field
from datetime import UTC, datetime, timedelta
from typing import TYPE_CHECKING, Protocol

from hermes_engine.config import UsageLimitSettings
from hermes_engine.holders import Holder
from hermes_engine.memory.book import LABELS, Document, MemoryBook
from hermes_engine.memory.documents import MemoryOwner, UnreadableDocument
from hermes_engine.memory.pending import PendingChanges
from hermes_engine.people.forget import ForgetOutcome
from hermes_engine.policy.limits import usage_today
from hermes_engine.policy.spending import cost_lines
from hermes_engine.ports.dashboard import AuditEntry, HeldLease, ListedPerson
from hermes_engine.ports.storage import AccountRecord, GoalRecord, PersonRecord, Store, UsageCount

if TYPE_CHECKING:
    from hermes_engine.skills.feature import SkillsFeature


@dataclass(frozen=True)
class PlatformState:
    bot: str
    platform: str
    connected: bool


@dataclass(frozen=True)
class Replica:
    """A process holding leases now (its replica name and pid; one process holds leases under several holder
    names), and how many of each family (`session`, `goal`, `job`, a platform's poller, …)."""

    holder: str
    leases: tuple[tuple[str, int], ...]


@dataclass(frozen=True)
class Overview:
    platforms: tuple[PlatformState, ...]
    pending_turns: int
    today: tuple[tuple[str, UsageCount], ...]  # per bot
    changes: tuple[AuditEntry, ...]
    replicas: tuple[Replica, ...] = ()
    between_runs: tuple[str, ...] = ()  # periodic jobs that ran on some replica and wait for their next interval
    faults: tuple[tuple[str, int], ...] = ()  # the last hour's, by kind (`error:provider`, `429:telegram`)


@dataclass(frozen=True)
class PeoplePage:
    rows: tuple[ListedPerson, ...]
    page: int  # from 1
    pages: int


@dataclass(frozen=True)
class PersonPage:
    person: PersonRecord
    accounts: tuple[AccountRecord, ...]
    documents: tuple[tuple[str, Document], ...]  # (file name, document): MEMORY.md, USER.md
    usage: tuple[tuple[str, tuple[str, ...]], ...] = ()  # per bot: what `/status` tells the person of it
    proposals: tuple[str, ...] = ()  # the background review's changes waiting for the person, described
    proposals_unreadable: str = ""


Forget = Callable[[int], Awaitable[ForgetOutcome | None]]


class GoalTeller(Protocol):
    """Tells a goal's conversation that an admin changed it here (a bot's goal feature does)."""

    async def tell_changed_by_admin(self, goal: GoalRecord) -> None: ...


@dataclass(frozen=True)
class Sources:
    """What the pages read from: the store, the memory rules the agent's own writes go through, the bots
    this gateway serves and its platforms' connections as they are now; `goal_turns`: each bot's budget of
    turns a goal (its profile's `goals.max_turns`); `skills`: each bot's skills feature (its libraries, usage,
    approval queue and curator), by bot; `goals`: each bot's goal feature, which tells a goal's conversation
    when an admin paused or cleared it here."""

    store: Store
    memory: MemoryBook
    bots: Sequence[str]
    platforms: Callable[[], Sequence[PlatformState]]
    _: KW_ONLY  # what follows is named where it is given
    limits: Mapping[str, UsageLimitSettings] = field(default_factory=dict)  # each bot's usage limits
    forget: Forget | None = None  # deletes everything kept about a person, as `/forget` does (None: not offered)
    goal_turns: Mapping[str, int] = field(default_factory=dict)  # each bot's turns a goal (`goals.max_turns`)
    slack_admins: frozenset[str] = frozenset()  # user ids in `access.admins` of the bot profiles serving Slack
    skills: Mapping[str, SkillsFeature] = field(default_factory=dict)
    goals: Mapping[str, GoalTeller] = field(default_factory=dict)  # by bot: who tells a goal's chat of a change


FAULT_WINDOW = timedelta(hours=1)


async def overview(sources: Sources) -> Overview:
    now = datetime.now(UTC)
    today = tuple([(bot, await sources.store.usage_total(bot, now.date())) for bot in sources.bots])
    faults = await sources.store.faults_since(now - FAULT_WINDOW)
    processes, between_runs = replicas(await sources.store.live_leases())
    return Overview(tuple(sources.platforms()), len(await sources.store.pending_inbound()), today,
                    tuple(await sources.store.dashboard_changes(limit=10)), processes, between_runs,
                    tuple(sorted(faults.items())))


def replicas(leases: Sequence[HeldLease]) -> tuple[tuple[Replica, ...], tuple[str, ...]]:
    """Leases by process, counted by family (the part of a lease's name before its first colon: never the
    chat a session lease names); and the periodic jobs whose lease marks a run done for this interval (held by
    no process)."""
    held: dict[str, Counter[str]] = {}
    between: set[str] = set()
    for lease in leases:
        holder = Holder.parse(lease.holder)
        if holder is None:
            between.add(lease.name.split(":", 1)[0])
            continue
        held.setdefault(f"{holder.replica} (pid {holder.pid})", Counter())[lease.name.split(":", 1)[0]] += 1
    return (tuple(Replica(process, tuple(sorted(families.items()))) for process, families in sorted(held.items())),
            tuple(sorted(between)))


PEOPLE_PER_PAGE = 50


async def people(sources: Sources, page: int = 1) -> PeoplePage:
    """Everyone with an account, as `hermes-gateway people list` shows them (a person /link merged into
    another has their accounts moved there), by id, a page at a time."""
    page = max(page, 1)
    rows, total = await sources.store.dashboard_people(offset=(page - 1) * PEOPLE_PER_PAGE, limit=PEOPLE_PER_PAGE)
    pages = max(1, -(-total // PEOPLE_PER_PAGE))
    if page > pages:  # past the end: the last page
        page = pages
        rows, total = await sources.store.dashboard_people(offset=(page - 1) * PEOPLE_PER_PAGE, limit=PEOPLE_PER_PAGE)
    return PeoplePage(tuple(rows), page, pages)


async def person(sources: Sources, person_id: int) -> PersonPage | None:
    record = await sources.store.get_person(person_id)
    if record is None or record.merged_into is not None:
        return None
    owner = MemoryOwner.person(person_id)
    documents = tuple([(LABELS[target], await sources.memory.document(owner, target)) for target in owner.targets()])
    day = datetime.now(UTC).date()
    usage = []
    for bot in sources.bots:
        limits = sources.limits.get(bot, UsageLimitSettings())
        lines = [await usage_today(sources.store, limits, bot, person_id, day),
                 *await cost_lines(sources.store, bot, person_id, day, admin=False, limit=limits.cost_per_day)]
        usage.append((bot, tuple(lines)))
    try:
        proposals, unreadable = tuple(p.describe() for p in await PendingChanges(sources.memory).waiting(owner)), ""
    except UnreadableDocument as exc:
        proposals, unreadable = (), exc.reason
    return PersonPage(record, tuple(await sources.store.list_accounts(person_id)), documents, tuple(usage),
                      proposals, unreadable)
