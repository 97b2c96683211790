"""Who is behind a platform account, remembered for the accounts of the sessions kept in memory.

Every message asks; the store answers once per account, and the answer stays until `/link` joins two
people or a person is forgotten (`clear`), or the account falls out of the bounded cache.
"""

from __future__ import annotations

from hermes_engine.ports.storage import PeopleStore


class PeopleCache:
    def __init__(self, store: PeopleStore, size: int) -> None:
        self._store = store
        self._size = size
        self._people: dict[tuple[str, str, str], int] = {}  # (platform, account, user id) → person

    async def person_of(self, platform: str, account: str, user_id: str, display_name: str = "") -> int:
        key = (platform, account, user_id)
        person_id = self._people.get(key)
        if person_id is None:
            record = await self._store.resolve_account(platform, account, user_id, display_name)
            person_id = self._people[key] = record.person_id
            if len(self._people) > self._size:
                del self._people[next(iter(self._people))]
        return person_id

    def clear(self) -> None:
        self._people.clear()
