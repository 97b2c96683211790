"""Context compression: keep a long session inside the model's context window without losing anything.

The in-memory `session.history` is a *view*; the stored messages are never deleted or changed. Before each
model call of a turn the next request is measured; above `threshold` (50%) of the window:

1. old tool results outside the protected tail become a one-line placeholder (no model call); if that is
   enough, stop;
2. otherwise the history is split at user-message boundaries into a protected head, the middle and a
   protected tail;
3. the middle is summarised by an auxiliary call through the turn's own provider chain into a structured
   summary; a later pass updates the previous summary instead of summarising a summary;
4. the view becomes head + one summary message + tail, and the compaction is recorded so a restart rebuilds
   the same view.

Modules, each importing only those above it:

- `planning`: settings, the meta keys on in-memory messages and the pure steps (placeholder pass, where to
  cut, the summary budget, the cut copy of an oversize message);
- `summariser`: the summary prompt and the auxiliary call that writes or updates a summary;
- `lineage`: the summary message, the stored-view rebuild (`load_history`) and stored ids;
- `service`: `CompactionService` (one per bot) and `SessionContext` (the per-call hook, hygiene, `/compress`);
- `feature`: `CompressionFeature`, which wires the service to the host.
"""
