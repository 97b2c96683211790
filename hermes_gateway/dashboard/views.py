"""What the pages show, gathered from the engine's ports: nothing here knows how or where it is stored."""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import TYPE_CHECKING

from hermes_engine.memory.book import LABELS, Document, MemoryBook
from hermes_engine.memory.documents import MemoryOwner
from hermes_engine.ports.dashboard import AuditEntry, ListedPerson
from hermes_engine.ports.storage import AccountRecord, PersonRecord, Store, UsageCount

if TYPE_CHECKING:
    from hermes_engine.skills.feature import SkillsFeature


@dataclass(frozen=True)
class PlatformState:
    bot: str
    platform: str
    connected: bool


@dataclass(frozen=True)
class Overview:
    platforms: tuple[PlatformState, ...]
    pending_turns: int
    today: tuple[tuple[str, UsageCount], ...]  # per bot
    changes: tuple[AuditEntry, ...]


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


@dataclass(frozen=True)
class Sources:
    """What the pages read from: the store, the memory rules the agent's own writes go through, the bots
    this gateway serves and its platforms' connections as they are now; `skills`: each bot's skills feature
    (its libraries, usage, approval queue and curator), by bot."""

    store: Store
    memory: MemoryBook
    bots: Sequence[str]
    platforms: Callable[[], Sequence[PlatformState]]
    skills: Mapping[str, SkillsFeature] = field(default_factory=dict)


async def overview(sources: Sources) -> Overview:
    day = datetime.now(UTC).date()
    today = tuple([(bot, await sources.store.usage_total(bot, day)) for bot in sources.bots])
    return Overview(tuple(sources.platforms()), len(await sources.store.pending_inbound()), today,
                    tuple(await sources.store.dashboard_changes(limit=10)))


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
    return PersonPage(record, tuple(await sources.store.list_accounts(person_id)), documents)
