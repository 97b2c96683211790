"""The core agent loop and what builds its requests."""
