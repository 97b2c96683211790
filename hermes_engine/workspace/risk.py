"""Classifying a terminal command before it runs: read-only, writes in the workspace, or dangerous.

Dangerous is what a person would want to see first: network use, package installs, deleting many files
(recursive or wildcard removal), and anything the security scanner's rules flag (`policy.scan_rules`:
piping downloads to a shell, reading secret files, destructive commands). Read-only is a short list of
commands that only look, chained with pipes. Everything else counts as a write. The classes are a guide
for approval, not the boundary: the sandbox is the boundary. A command asked for in a turn that read untrusted
content (`strict`) is judged by every rule of every kind, as that turn's writes are.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from hermes_engine.policy.security import ScanMode, scan

READ_ONLY, WRITES, DANGEROUS = "read-only", "writes", "dangerous"
RISKS = (READ_ONLY, WRITES, DANGEROUS)

_NETWORK = re.compile(r"\b(?:curl|wget|nc|ncat|netcat|socat|ssh|scp|rsync|ftp|sftp|telnet|ping|dig|nslookup|"
                      r"git\s+(?:clone|fetch|pull|push)|pip3?\s+download)\b")
_INSTALL = re.compile(r"\b(?:apt(?:-get)?|dpkg|yum|dnf|apk|pacman|brew|snap)\s+(?:-\S+\s+)*(?:install|add|-i)\b|"
                      r"\b(?:pip3?|python3?\s+-m\s+pip|npm|pnpm|yarn|gem|cargo|go)\s+(?:-\S+\s+)*(?:install|add|get)\b")
_MANY_DELETIONS = re.compile(r"\brm\s+(?:-\S*[rR]\S*|--recursive)|\brm\b[^;&|\n]*\*|\bfind\b[^;&|\n]*-delete\b|"
                             r"\bshred\b|\btruncate\b|\bmkfs\b|\bdd\b")
_READ_ONLY_COMMANDS = frozenset({"ls", "cat", "head", "tail", "wc", "grep", "egrep", "fgrep", "pwd", "echo",
                                 "file", "stat", "du", "df", "find", "sort", "uniq", "tree", "id", "whoami",
                                 "date", "env", "which", "diff", "cmp", "md5sum", "sha256sum", "true", "less",
                                 "more", "cut", "tr", "nl", "uname", "printf"})
_WRITE_SYNTAX = re.compile(r">|\$\(|`|\b-exec\b|\b-delete\b|\b-fprint")


@dataclass(frozen=True)
class Risk:
    level: str
    reason: str


def classify(command: str, *, strict: bool = False) -> Risk:
    findings = [f.rule for f in scan(f"```\n{command}\n```", kind="skill", mode=ScanMode(strict=strict)).findings]
    if findings:
        return Risk(DANGEROUS, "flagged by the security rules: " + ", ".join(dict.fromkeys(findings)))
    for pattern, reason in ((_NETWORK, "uses the network"), (_INSTALL, "installs packages"),
                            (_MANY_DELETIONS, "deletes many files")):
        if pattern.search(command):
            return Risk(DANGEROUS, reason)
    if _WRITE_SYNTAX.search(command):
        return Risk(WRITES, "may write files")
    words = [part.strip().split(maxsplit=1)[0] for part in re.split(r"\|\|?|&&|;", command) if part.strip()]
    if words and all(word in _READ_ONLY_COMMANDS for word in words):
        return Risk(READ_ONLY, "only reads")
    return Risk(WRITES, "may write files")
