"""Per-person memory: MEMORY.md (notes) and USER.md (profile), plus shared memory for a group/channel/server.

- `documents`: what a memory document is, whose it is (`MemoryOwner`), and where documents live (the contract).
- `store`: the `MemoryStore` protocol and its file and in-memory homes; `database`: the database's.
- `book`: `MemoryBook`, the rules (limits, duplicates, unique matching, the security scan) over any store.
- `tool`: the `memory(action, target, content, old_text)` agent tool (or `operations`, several at once).
- `pending`: changes the background review proposed, waiting for the person (`/memory pending`).
- `feature`: `MemoryFeature` (tool + prompt section + `/memory` command).
The operator's `hermes-gateway memory show|edit|export` is `hermes_gateway/cli/memory.py`.
"""

from hermes_engine.memory.feature import MemoryFeature, MemoryPromptContributor
from hermes_engine.memory.store import (
                                        Document,
                                        FileMemoryStore,
                                        InMemoryStore,
                                        MemoryBook,
                                        MemoryOwner,
                                        MemoryResult,
                                        MemoryStore,
)
from hermes_engine.memory.tool import memory as memory_tool

__all__ = ["Document", "FileMemoryStore", "InMemoryStore", "MemoryBook", "MemoryFeature", "MemoryOwner",
           "MemoryPromptContributor", "MemoryResult", "MemoryStore", "memory_tool"]
