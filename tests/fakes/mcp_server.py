"""A small MCP server built with the SDK's server side, for the MCP tests.

Run as `python mcp_server.py stdio` or `python mcp_server.py http PORT` (Streamable HTTP on 127.0.0.1).
`FAKE_MCP_LABEL` names the instance (echo says it), so tests can tell two servers apart;
`FAKE_MCP_FAIL=1` makes it exit before speaking (a server that fails to start), `FAKE_MCP_FAIL_UNLESS`
names a file without which it does the same (a server that comes up once the file exists);
`FAKE_MCP_START_DELAY` is how many seconds it takes to start (silent until then, as a server that loads
something first); `FAKE_MCP_PIDFILE` is where it writes its process id; `FAKE_MCP_CALLS` names a file where each echo call
appends its text (what reached the server); `FAKE_MCP_LINGER=1` keeps it running after its stdin closed
(it must be stopped by a signal); `FAKE_MCP_PYTHON=1` adds the `python` tool; `FAKE_MCP_EXTRA` names a file whose lines are tools
it adds at start (the `grow` tool adds one at once and announces that the tool list changed).
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import sys
import time
from pathlib import Path
from typing import Annotated

from mcp.server.mcpserver import Context, MCPServer
from mcp.server.mcpserver.exceptions import ToolError
from mcp.server.mcpserver.utilities.types import Image
from mcp.types import ResourceLink, TextContent
from pydantic import Strict

LABEL = os.environ.get("FAKE_MCP_LABEL", "fake")
server = MCPServer(LABEL, log_level="WARNING")
PNG = bytes.fromhex("89504e470d0a1a0a0000000d4948445200000001000000010806000000"
                    "1f15c4890000000d49444154789c6360000002000001e221bc330000000049454e44ae426082")


@server.tool()
def echo(text: str) -> str:
    """Say the text back, with the server's label."""
    if os.environ.get("FAKE_MCP_CALLS"):
        with open(os.environ["FAKE_MCP_CALLS"], "a", encoding="utf-8") as calls:
            calls.write(text + "\n")
    return f"{LABEL} says: {text}"


@server.tool()
def repeat(text: str, times: Annotated[int, Strict()]) -> str:
    """The text this many times; `times` is checked strictly, as servers written with zod check it:
    `"3"` is not an integer."""
    return text * times


@server.tool()
def env_var(name: str) -> str:
    """The value of an environment variable of this process, or "unset"."""
    return os.environ.get(name, "unset")


@server.tool()
def peek(gateway_pid: int, home: str) -> dict[str, str]:
    """What this server can take of the gateway's: the environment of its parent and of the gateway's
    process, the list of the gateway's home and its database. Each value is what was read, or the error."""
    def attempt(read) -> str:  # type: ignore[no-untyped-def]
        try:
            return str(read())
        except OSError as exc:
            return f"refused: {type(exc).__name__}: {exc.strerror}"

    return {"parent environ": attempt(lambda: Path(f"/proc/{os.getppid()}/environ").read_bytes().decode("utf-8", "replace")),
            "gateway environ": attempt(lambda: Path(f"/proc/{gateway_pid}/environ").read_bytes().decode("utf-8", "replace")),
            "home listing": attempt(lambda: sorted(os.listdir(home))),
            "database": attempt(lambda: len(Path(home, "hermes.db").read_bytes()))}


def python(code: str) -> str:
    """Run Python code in a child process of this server (its interpreter); its output and exit code. What
    the limit tests run inside a sandboxed server: forks, allocations, connections."""
    import subprocess

    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120, check=False)
    return f"{done.stdout}{done.stderr}[exit {done.returncode}]"


if os.environ.get("FAKE_MCP_PYTHON"):  # only where asked: the other tests and benchmarks count the tools
    server.add_tool(python)


@server.tool()
def crash_once(marker: str) -> str:
    """The first call (no marker file yet) kills the server process; later calls answer."""
    if not Path(marker).exists():
        Path(marker).write_text("crashed", encoding="utf-8")
        os._exit(3)
    return "alive again"


@server.tool()
async def hang(seconds: float) -> str:
    """Take this long to answer."""
    await asyncio.sleep(seconds)
    return "finally"


@server.tool()
def big(chars: int) -> str:
    """A result of this many characters."""
    return ("some text " * (chars // 10 + 1))[:chars]  # words: a run of digits would be redacted as a secret


@server.tool()
def picture() -> Image:
    """A 1x1 PNG."""
    return Image(data=PNG, format="png")


@server.tool()
def attachment(name: str) -> list[TextContent | ResourceLink]:
    """A text and a link to a resource the client may read."""
    return [TextContent(type="text", text=f"see {name}"),
            ResourceLink(type="resource_link", name=name, uri=f"file:///reports/{name}", mime_type="text/plain")]


@server.tool()
def fail(reason: str) -> str:
    """Raises, so the server answers with a tool error."""
    raise ToolError(reason)


@server.tool(name="look.up now!")
def look_up_dotted(key: str) -> str:
    """A name with characters providers refuse."""
    return f"dotted {key}"


@server.tool(name="look_up_now")
def look_up_plain(key: str) -> str:
    """The same name once cleaned."""
    return f"plain {key}"


def add_extra(name: str) -> None:
    def extra(text: str) -> str:
        return f"{name} got: {text}"

    server.add_tool(extra, name=name, description=f"An added tool, {name}.")


@server.tool()
async def grow(name: str, ctx: Context) -> str:
    """Add a tool with this name now and tell the client its tool list changed."""
    add_extra(name)
    await ctx.notify_tools_changed()
    return f"added {name}"


if __name__ == "__main__":
    if os.environ.get("FAKE_MCP_FAIL"):
        sys.exit(2)
    if os.environ.get("FAKE_MCP_FAIL_UNLESS") and not Path(os.environ["FAKE_MCP_FAIL_UNLESS"]).exists():
        sys.exit(2)
    time.sleep(float(os.environ.get("FAKE_MCP_START_DELAY") or 0))
    extras = Path(os.environ.get("FAKE_MCP_EXTRA") or "/nonexistent")
    for line in extras.read_text(encoding="utf-8").split() if extras.exists() else []:
        add_extra(line)
    if os.environ.get("FAKE_MCP_PIDFILE"):
        Path(os.environ["FAKE_MCP_PIDFILE"]).write_text(str(os.getpid()), encoding="utf-8")
    if sys.argv[1:2] == ["http"]:
        server.run("streamable-http", host="127.0.0.1", port=int(sys.argv[2]))
    else:
        try:
            server.run("stdio")
        finally:
            while os.environ.get("FAKE_MCP_LINGER"):  # a server that does not end when its input does
                with contextlib.suppress(BaseException):
                    time.sleep(3600)
