"""A workspace per conversation, a sandboxed terminal and file tools confined to it, with approvals."""
