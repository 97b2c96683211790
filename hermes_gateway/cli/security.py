"""`hermes-gateway security …`: scan files as the agent's own writes are scanned, and approve what the scan
holds for an admin.

A low-severity finding (injection wording inside code) blocks a write until an admin approves it; the
approval is recorded by fingerprint under `<HERMES_HOME>/security/approved.json` (HERMES_HOME from the
environment, as the gateway uses it; a home without the service's data is refused, see
`hermes_gateway.cli.home`), so the running gateway accepts the content on the next write. High
findings are never approved: the content must change.
"""

from __future__ import annotations

import re
from pathlib import Path

import typer

from hermes_engine.policy.approved import ApprovedHashes
from hermes_engine.policy.security import HIGH, KINDS, ScanMode, ScanResult, scan
from hermes_gateway.cli.home import checked_settings

app = typer.Typer(rich_markup_mode=None,
                  help="Scan memory and skill files; approve content held for an admin.", no_args_is_help=True)

_FINGERPRINT = re.compile(r"[0-9a-f]{16}")
_KIND = typer.Option("skill", "--kind", help=f"What the file is: {' or '.join(KINDS)}.")


def _read(path: Path) -> str:
    try:
        return path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        typer.echo(f"Error: cannot read {path} ({exc}).", err=True)
        raise typer.Exit(2) from None


def _check_kind(kind: str) -> None:
    if kind not in KINDS:
        typer.echo(f"Error: --kind must be one of {', '.join(KINDS)}.", err=True)
        raise typer.Exit(2)


def _report(path: Path, result: ScanResult) -> None:
    for f in result.findings:
        state = "approved" if f.severity != HIGH and f.fingerprint in result.approved else f.severity
        typer.echo(f"{path}: {state:<8} {f.rule:<22} {f.fingerprint or '-':<16} {f.excerpt}")
    verdict = ("blocked" if any(f.severity == HIGH for f in result.blocking) else
               "held for an admin" if result.blocked else "accepted")
    typer.echo(f"{path}: {verdict}")


@app.command("scan")
def scan_files(paths: list[Path] = typer.Argument(..., help="Files to scan (SKILL.md, MEMORY.md, …)."),
               kind: str = _KIND) -> None:
    """Print every finding with its severity and fingerprint; exits 1 when a file would be refused."""
    _check_kind(kind)
    checked_settings()  # the approvals that count are the service's
    refused = False
    for path in paths:
        result = scan(_read(path), kind=kind)
        _report(path, result)
        refused = refused or result.blocked
    raise typer.Exit(1 if refused else 0)


@app.command()
def approve(targets: list[str] = typer.Argument(..., help="Files whose low findings to approve, or fingerprints "
                                                        "quoted in a refusal."),
            kind: str = _KIND, by: str = typer.Option("cli", "--by", help="Who approves (recorded).")) -> None:
    """Approve content held for an admin: the low findings of each FILE as it is now, or FINGERPRINTs.
    Exits 1 when a file still has high findings (those are never approved)."""
    _check_kind(kind)
    checked_settings()
    store = ApprovedHashes.default()
    still_blocked = False
    for target in targets:
        path = Path(target)
        if path.is_file():
            result = scan(_read(path), kind=kind, mode=ScanMode(approved_by=by))
            _report(path, result)
            still_blocked = still_blocked or result.blocked  # high findings are never approved
        elif _FINGERPRINT.fullmatch(target):
            store.approve_fingerprints([target], by=by)
            typer.echo(f"Approved {target}.")
        else:
            typer.echo(f"Error: {target} is neither a file nor a 16-character fingerprint.", err=True)
            raise typer.Exit(2)
    raise typer.Exit(1 if still_blocked else 0)


@app.command("list")
def list_() -> None:
    """Approved fingerprints: rule, who approved and when, and an excerpt."""
    checked_settings()
    entries = ApprovedHashes.default().entries()
    if not entries:
        typer.echo("Nothing approved.")
    for fingerprint, entry in sorted(entries.items(), key=lambda item: item[1].get("at", "")):
        typer.echo(f"{fingerprint}  {entry.get('at', '')[:16]}  {entry.get('by', '')}  {entry.get('rule', '')}  "
                   f"{entry.get('excerpt', '')}")


@app.command()
def revoke(fingerprint: str = typer.Argument(..., help="An approved fingerprint (see `list`).")) -> None:
    """Withdraw an approval: the content is held again on its next write."""
    checked_settings()
    if not ApprovedHashes.default().revoke(fingerprint):
        typer.echo(f"{fingerprint} is not approved.", err=True)
        raise typer.Exit(1)
    typer.echo(f"Revoked {fingerprint}.")
