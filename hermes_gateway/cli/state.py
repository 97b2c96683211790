"""The command line's view of memory and pairing, on whichever backend the gateway uses
(`Settings.state_backend`): files under the home, or the database.

Pairing is blocking and its database store hands each call to an event loop, so commands that are not
async themselves get a store opened on a loop of its own, in a thread, for as long as they need it.
"""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Iterator
from contextlib import contextmanager

from hermes_engine.config import Settings
from hermes_engine.policy.pairing import Pairing
from hermes_engine.ports.storage import Store


@contextmanager
def store_on_thread(url: str, *, create: bool = True) -> Iterator[tuple[Store, asyncio.AbstractEventLoop]]:
    """An opened (and migrated) store for `url`, living on an event loop that runs in a thread of its own;
    with `create=False` only a database that is there (`storage.store.SqlStore`)."""
    from storage.store import SqlStore

    loop = asyncio.new_event_loop()
    thread = threading.Thread(target=loop.run_forever, name="hermes-state", daemon=True)
    thread.start()
    store = SqlStore(url, create=create)
    try:
        asyncio.run_coroutine_threadsafe(store.init(), loop).result()
        try:
            yield store, loop
        finally:
            asyncio.run_coroutine_threadsafe(store.close(), loop).result()
    finally:
        loop.call_soon_threadsafe(loop.stop)
        thread.join()
        loop.close()


@contextmanager
def pairing_for(settings: Settings) -> Iterator[Pairing]:
    """The gateway's pairing: `pairing.json` under the home, or the database's (see the module docstring);
    `settings` are an operator command's (`hermes_gateway.cli.home.checked_settings`)."""
    if not settings.state_in_database:
        yield Pairing.for_home(settings.home)
        return
    from hermes_engine.policy.pairing_db import DatabasePairingStore

    with store_on_thread(settings.db_url, create=False) as (store, loop):
        yield Pairing(DatabasePairingStore(store, loop))
