"""The contract between the engine and whatever talks MCP: the engine asks for tools and calls them, the
gateway's client (`hermes_gateway/mcp/`) keeps the servers running. Owned here, by the side that uses it."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, Literal, Protocol


@dataclass(frozen=True)
class RemoteTool:
    server: str
    name: str  # as the server declares it
    description: str
    input_schema: dict[str, Any]


@dataclass(frozen=True)
class RemotePart:
    """One piece of a result: text, an image (base64 `data`) or a link to a resource."""

    kind: Literal["text", "image", "link"]
    text: str = ""
    data: str = ""
    mime_type: str = ""
    uri: str = ""


@dataclass(frozen=True)
class RemoteResult:
    parts: list[RemotePart] = field(default_factory=list)
    is_error: bool = False


class ServerUnavailable(Exception):
    """The server is not running (failed to start, or died and is being restarted)."""


class McpServers(Protocol):
    """The running servers of one gateway."""

    async def start(self) -> None:
        """Start every server; one that fails is logged and retried, never raised."""

    async def stop(self) -> None: ...

    def tools(self) -> list[RemoteTool]:
        """The tools of the servers that are (or were) running, as they last listed them."""

    async def first_start(self, timeout: float) -> list[str]:
        """Wait up to `timeout` seconds for the servers still in their first start (not at all when none
        is); then one phrase per server whose tools were never listed, as it is still starting or failed."""

    def watch(self, changed: Callable[[], None]) -> None:
        """Call `changed` when a listing changes: a server came up, started again with other tools, or
        said `tools/list_changed`."""

    def not_ready(self) -> list[str]:
        """One phrase per server that is not running, for `/ready`."""

    async def call(self, server: str, tool: str, arguments: dict[str, Any], timeout: float) -> RemoteResult:
        """Raises `ServerUnavailable`, `TimeoutError`, or another exception naming the failure."""
