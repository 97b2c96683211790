"""`hermes-gateway dashboard link`: a one-time sign-in link to the web dashboard, for the operator on the server.

    hermes-gateway dashboard link

The link points at `HERMES_PUBLIC_URL` (default `http://HERMES_HTTP_HOST:HERMES_HTTP_PORT`), works once and
expires after `HERMES_DASHBOARD_LINK_MINUTES` (10); a running gateway serves it under `/admin`.
"""

from __future__ import annotations

import typer

from hermes_engine.errors import ConfigError
from hermes_engine.ports.storage import Store
from hermes_gateway.cli.home import checked_settings, refuse, with_store
from hermes_gateway.dashboard.config import Dashboard
from hermes_gateway.dashboard.links import minutes, sign_in_link

app = typer.Typer(rich_markup_mode=None, help="The web dashboard served under /admin.", no_args_is_help=True)


@app.command()
def link() -> None:
    """Print a one-time sign-in link to the dashboard."""
    try:
        dashboard = Dashboard.from_settings(checked_settings())
    except ConfigError as exc:
        refuse(str(exc))

    async def make(store: Store) -> str:
        return await sign_in_link(store, dashboard, "operator")

    url = with_store(make)
    typer.echo(url)
    typer.echo(f"It works once, for {minutes(dashboard)}.", err=True)
