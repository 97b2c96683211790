"""Compaction lineage and full-text search as functions on an engine (e.g. a `SqlStore`'s `.engine`), for
code that holds an engine rather than a store. They live in `storage.repos.lineage` and
`storage.repos.search`; this module keeps their older import path.
"""

from __future__ import annotations

from hermes_engine.ports.storage import CompactionRecord, MessageRef, SearchHit
from storage.repos.lineage import (
    compactions,
    latest_compaction,
    list_compactions,
    message_refs_after,
    record_compaction,
)
from storage.repos.search import export_session_ids, query_words, search

__all__ = ["CompactionRecord", "MessageRef", "SearchHit", "compactions", "export_session_ids",
           "latest_compaction", "list_compactions", "message_refs_after", "query_words", "record_compaction",
           "search"]
