"""`hermes-gateway pairing …`: approve people who asked for access, list and revoke approvals.

Works where the gateway keeps pairing (`HERMES_STATE_BACKEND`): `<HERMES_HOME>/pairing.json` under the
same lock as the running gateway, or the database every replica reads, so an approval takes effect on the
person's next message without a restart.
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from contextlib import contextmanager

import typer

from hermes_engine.policy.pairing import Pairing
from hermes_gateway.cli.home import checked_settings
from hermes_gateway.cli.printable import printable

app = typer.Typer(rich_markup_mode=None,
                  help="Approve people who asked for access with a pairing code.", no_args_is_help=True)


@contextmanager
def _pairing() -> Iterator[Pairing]:
    from hermes_gateway.cli.state import pairing_for

    with pairing_for(checked_settings()) as pairing:
        yield pairing


def _who(name: str, user_id: str) -> str:
    return printable(f"{user_id} ({name})" if name else user_id)


@app.command()
def approve(code: str = typer.Argument(..., help="The 8-character code the person was given.")) -> None:
    """Give the person behind CODE access to the bots of this HERMES_HOME."""
    with _pairing() as pairing:
        approval = pairing.approve(code)
    if approval is None:
        typer.echo("No pending request has that code (codes expire after an hour; the person gets a fresh "
                   "one by writing to the bot again).", err=True)
        raise typer.Exit(1)
    typer.echo(f"Approved {approval.platform} user {_who(approval.user_name, approval.user_id)}.")


@app.command("list")
def list_() -> None:
    """Pending requests (with their codes) and approved people."""
    with _pairing() as pairing:
        pending, approved = pairing.pending(), pairing.approved()
    now = time.time()
    typer.echo("Pending requests:" if pending else "Pending requests: none")
    for request in pending:
        minutes = max(1, int((request.expires_at - now) // 60))
        typer.echo(f"  {request.code}  {request.platform:<9} {_who(request.user_name, request.user_id)}"
                   f"  expires in {minutes} min")
    typer.echo("Approved:" if approved else "Approved: none")
    for approval in approved:
        when = time.strftime("%Y-%m-%d %H:%M", time.localtime(approval.approved_at))
        typer.echo(f"  {approval.platform:<9} {_who(approval.user_name, approval.user_id)}  since {when}")


@app.command()
def revoke(platform: str = typer.Argument(..., help="telegram, discord, …"),
           user_id: str = typer.Argument(..., help="The person's id on that platform.")) -> None:
    """Withdraw a person's approval (and any pending code of theirs)."""
    with _pairing() as pairing:
        revoked = pairing.revoke(platform.lower(), user_id)
    if not revoked:
        typer.echo(f"No approval or pending request for {platform} user {user_id}.", err=True)
        raise typer.Exit(1)
    typer.echo(f"Revoked access for {platform} user {user_id}.")
