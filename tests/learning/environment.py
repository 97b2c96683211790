"""The learning-curve environment: task families that share a procedure, and the knowledge-base tool.

Every family is a repeated chore (deploy a service, set up a new hire, reconcile a month): each task names
a different subject, and all of them are solved by the same few lookups. Without a skill, the work starts by
finding out where things are (orientation lookups) before the lookups that matter; a saved procedure
names the lookups that matter. Everything here is a pure function of its input, so every run is the same.
"""

from __future__ import annotations

import re
import zlib
from dataclasses import dataclass

from hermes_engine.tools.registry import Tool, tool


@dataclass(frozen=True)
class Family:
    """Tasks sharing one procedure. `{s}` in a key or sentence stands for the task's subject."""

    name: str
    task: str  # the person's request
    pattern: str  # how the model recognises a task of this family (one group: the subject)
    subjects: tuple[str, ...]
    orientation: tuple[str, ...]  # lookups that only find out where things are
    procedure: tuple[str, ...]  # lookups that do the work
    placeholder: str  # how a saved skill names the subject in its steps
    marker: str  # words the family's skill says in "When to use" (how the model judges a loaded skill)
    skill_name: str
    category: str
    description: str
    tags: tuple[str, ...]
    answer: str

    def tasks(self) -> list[str]:
        return [self.task.format(s=s) for s in self.subjects]

    def subject_of(self, text: str) -> str | None:
        m = re.search(self.pattern, text)
        return m.group(1) if m else None

    def exploration(self, subject: str) -> list[str]:
        return [k.format(s=subject) for k in (*self.orientation, *self.procedure)]

    def skill_md(self) -> str:
        """The SKILL.md a reviewer writes after exploring one task of this family."""
        steps = [f"lookup `{k.format(s=self.placeholder)}` and check the entry." for k in self.procedure]
        return (f"---\nname: {self.skill_name}\ndescription: {self.description}\nversion: 1.0.0\n"
                f"category: {self.category}\ntags: [{', '.join(self.tags)}]\n---\n\n"
                f"## When to use\nWhen asked to {self.marker} ({self.placeholder} varies).\n\n## Steps\n"
                + "\n".join(f"{i}. {s}" for i, s in enumerate(steps, start=1))
                + f"\n{len(steps) + 1}. Answer with what each lookup said.\n\n## Pitfalls\n"
                "- The orientation pages (handbooks, runbook lists) add nothing; go straight to the steps.\n")


FAMILIES: tuple[Family, ...] = (
    Family(
        name="deploy", task="Deploy the {s} service to staging.", pattern=r"Deploy the (\w+) service to staging",
        subjects=("billing", "search", "checkout", "notifications", "reports"),
        orientation=("runbooks", "runbooks/deploy", "services/{s}", "owners/{s}", "environments", "changelog/{s}"),
        procedure=("ci/{s}", "config/{s}/staging", "migrations/{s}", "health/{s}/staging"),
        placeholder="<service>", marker="deploy a service to staging", skill_name="staging-deploy-checklist",
        category="devops", description="Deploy a service to staging after checking CI, config, migrations and health.",
        tags=("deploy", "staging", "service"), answer="Deployed {s} to staging: CI green, config and migrations "
        "checked, health ok."),
    Family(
        name="onboarding", task="Set up accounts for the new hire {s}.", pattern=r"accounts for the new hire (\w+)",
        subjects=("alice", "bruno", "chen", "dana", "emeka"),
        orientation=("handbook", "handbook/onboarding", "people/{s}", "teams", "it/tickets", "policies/access"),
        procedure=("directory/{s}", "groups/{s}", "laptop/{s}", "vpn/{s}"),
        placeholder="<person>", marker="set up accounts for a new hire", skill_name="new-hire-account-setup",
        category="people", description="Set up the accounts of a new hire (directory, groups, laptop, VPN).",
        tags=("onboarding", "hire", "accounts"), answer="Accounts for {s} are ready: directory, groups, laptop "
        "and VPN."),
    Family(
        name="invoices", task="Reconcile the {s} invoices with the bank statement.",
        pattern=r"Reconcile the (\w+) invoices", subjects=("january", "february", "march", "april", "may"),
        orientation=("finance", "finance/close", "ledger/{s}", "vendors", "bank", "policies/approvals"),
        procedure=("invoices/{s}", "statement/{s}", "mismatches/{s}", "approvals/{s}"),
        placeholder="<month>", marker="reconcile a month's invoices with the bank statement",
        skill_name="monthly-invoice-reconciliation", category="finance",
        description="Reconcile a month's invoices with the bank statement.",
        tags=("invoices", "reconcile", "bank", "statement"), answer="The {s} invoices match the statement "
        "after the listed corrections."),
)


def family_of(text: str) -> tuple[Family, str] | None:
    """The family and subject of a request, as a model would understand it."""
    for family in FAMILIES:
        subject = family.subject_of(text)
        if subject:
            return family, subject
    return None


def entry(key: str) -> str:
    """The knowledge base: one deterministic entry per key (a number stands for the entry's details)."""
    return f"{key}: entry #{zlib.crc32(key.encode()) % 10_000} found, nothing unusual."


@tool(toolset="test")
def lookup(key: str) -> str:
    """Read one entry of the team's knowledge base (runbooks, services, people, finance).

    Args:
      key: entry path, e.g. runbooks/deploy
    """
    return entry(key)


LOOKUP: Tool = lookup

__all__ = ["FAMILIES", "LOOKUP", "Family", "entry", "family_of"]
