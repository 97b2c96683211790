"""`hermes-gateway mcp list --bot PROFILE`: start the profile's MCP servers, print their tools as the
model would see them (names, full or compact), and stop them. Exits 1 when a server did not start."""

from __future__ import annotations

import asyncio

import typer

from hermes_engine.config import load_profile, load_settings
from hermes_engine.errors import HermesError

app = typer.Typer(rich_markup_mode=None,
                  add_completion=False, no_args_is_help=True, help="MCP servers of a bot profile.")


def _first_line(text: str) -> str:
    return text.strip().splitlines()[0] if text.strip() else ""


async def _listing(bot: str | None) -> tuple[list[str], bool]:
    from hermes_engine.mcp.feature import McpFeature
    from hermes_gateway.mcp.manager import ServerManager
    from hermes_gateway.preflight import mcp_findings
    from hermes_gateway.wiring import server_sandbox

    profile = load_profile(bot)
    problem = next((f.text for f in mcp_findings(profile) if f.level == "fix"), None)
    if problem:
        raise HermesError(problem)
    if not profile.mcp_servers:
        return [f"bot profile '{profile.name}' has no mcp_servers"], True
    manager = ServerManager(profile.mcp_servers, server_sandbox(load_settings(), profile))
    feature = McpFeature(manager, profile.mcp_servers, profile.mcp_schema_budget,
                         start_wait=profile.mcp_start_wait_seconds)
    await manager.start()
    try:
        tools = feature.build_tools(set())
        lines = [f"{t.name}  [{t.toolset}]  {_first_line(t.description)}"
                 for t in tools if t.name not in ("mcp_call", "mcp_describe", "mcp_result_page")]
        lines += [f"{name}  [compact: through mcp_call]  {_first_line(remote.description)}"
                  for name, remote in sorted(feature.compact.items())]
        lines += [f"not running: {phrase}" for phrase in manager.not_ready()]
        return lines, not manager.not_ready()
    finally:
        await manager.stop()


@app.command("list")
def list_tools(bot: str | None = typer.Option(None, "--bot", help="Bot profile folder or name under ./bots.")) -> None:
    """Start the servers, print each tool as `name  [source]  description`, stop them."""
    try:
        lines, healthy = asyncio.run(_listing(bot))
    except HermesError as exc:
        typer.echo(f"hermes-gateway: {exc}", err=True)
        raise typer.Exit(2) from None
    for line in lines:
        typer.echo(line)
    raise typer.Exit(0 if healthy else 1)
