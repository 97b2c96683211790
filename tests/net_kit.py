"""A TCP server on one address of this host, for tests of what a sandbox's network may reach."""

from __future__ import annotations

import contextlib
import socket
import threading
from collections.abc import Iterator


@contextlib.contextmanager
def serving(address: str) -> Iterator[int]:
    """A server on `address` answering every connection with one line naming the address; yields its port."""
    server = socket.create_server((address, 0))

    def answer() -> None:
        with contextlib.suppress(OSError):
            while True:
                conn, _ = server.accept()
                conn.sendall(f"hello from {address}\n".encode())
                conn.close()

    threading.Thread(target=answer, daemon=True).start()
    try:
        yield server.getsockname()[1]
    finally:
        server.close()
