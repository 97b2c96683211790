"""Loopback fakes of the remote services (LLM APIs, chat platforms) that tests drive with real client libraries."""
