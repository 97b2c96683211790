"""Pairing state in the database (the `DocumentStore` role), so every replica sees one set of approvals.

The state is the same JSON document the file backend keeps in `pairing.json`, stored at one path. `update`
is optimistic: read the state and its version, apply the change, write it back only if the version is
still the one read; when another replica wrote first, read again and apply the change again (changes are
functions of the state, so a retry decides on the newest state and no approval or code is lost).

`Pairing` is blocking (it is called from worker threads), the store is async: each call is handed to the
event loop the store was made on and waited for. Calling it on that loop itself would wait forever, so
that is refused with a clear error.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import Callable, Coroutine
from typing import Any, TypeVar

from hermes_engine.blocking import call_on_loop
from hermes_engine.policy.pairing import FILE_NAME, PairingState
from hermes_engine.ports.storage import DocumentStore, StoredDocument

AREA = "pairing"
PATH = FILE_NAME
_ATTEMPTS = 50

T = TypeVar("T")


def state_text(state: PairingState) -> str:
    return json.dumps(state.to_dict(), indent=1, sort_keys=True)


def parse_state(text: str, where: str) -> PairingState:
    try:
        return PairingState.from_dict(json.loads(text) if text.strip() else {})
    except (ValueError, TypeError) as exc:  # never silently forget approvals
        raise RuntimeError(f"{where} is damaged ({exc}); fix or remove it") from exc


class DatabasePairingStore:
    """`PairingStore` on a `DocumentStore` (see the module docstring)."""

    def __init__(self, documents: DocumentStore, loop: asyncio.AbstractEventLoop | None = None) -> None:
        self.documents = documents
        self.loop = loop or asyncio.get_running_loop()

    def _run(self, call: Coroutine[Any, Any, T]) -> T:
        return call_on_loop(self.loop, call, "the database pairing store")

    def _load(self) -> tuple[PairingState, int]:
        doc: StoredDocument | None = self._run(self.documents.get_document(AREA, PATH))
        if doc is None:
            return PairingState(), 0
        return parse_state(doc.text, "the pairing state in the database"), doc.version

    def read(self) -> PairingState:
        return self._load()[0]

    def update(self, change: Callable[[PairingState], T]) -> T:
        for _ in range(_ATTEMPTS):
            state, version = self._load()
            result = change(state)
            if self._run(self.documents.put_document(AREA, PATH, state_text(state), expected_version=version)):
                return result
        raise RuntimeError(f"the pairing state kept changing under {_ATTEMPTS} attempts to update it; "
                           "nothing was changed")


__all__ = ["AREA", "DatabasePairingStore", "PATH", "parse_state", "state_text"]
