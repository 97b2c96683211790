"""The kanban board: cards worked on in parallel by scoped workers, driven by one dispatcher per database."""
