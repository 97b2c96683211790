"""Security scan for everything the agent writes to itself (memory entries, skills).

What the agent saves today enters a system prompt tomorrow, so a write is refused when it looks like a
prompt injection, hides instructions, tries to send secrets somewhere, holds a secret itself, or (for
skills) carries a destructive shell command. Patterns anchor on attack wording, not on bossy English,
so ordinary facts ("User prefers concise answers", "deploys with curl-based health checks") pass.

API (imported by memory and skills; keep it stable):
    Finding(rule, excerpt)            one hit; `excerpt` never holds a secret in clear
    scan_text(text, kind="memory")   -> list[Finding]  (kind "skill" adds destructive commands)
    BlockedContent(findings)         exception carrying the findings
    explain(findings) -> str         one sentence for the model: why it was blocked
"""

from __future__ import annotations

import re
import unicodedata
from collections.abc import Iterable
from dataclasses import dataclass

from hermes_engine.policy.secrets import find_secrets, mask

__all__ = ["Finding", "scan_text", "BlockedContent", "explain", "INVISIBLE_RANGES", "RULES"]


@dataclass(frozen=True)
class Finding:
    rule: str
    excerpt: str


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
_INVISIBLE_CLASS = "".join(
    f"\\U{lo:08x}" if lo == hi else f"\\U{lo:08x}-\\U{hi:08x}" for lo, hi in INVISIBLE_RANGES
)
_INVISIBLE = re.compile(f"[{_INVISIBLE_CLASS}]")

# Bounded filler between key words: "ignore all of the previous instructions". Unbounded `(\w+\s+)*`
# backtracks badly on long input.
_W = r"(?:[\w'’,-]+\s+){0,5}?"

# --- prompt injection ----------------------------------------------------------------------------------

_INJECTION: list[tuple[str, str]] = [
    ("ignore_instructions",
     rf"\b(?:ignore|forget|disregard|override|abandon)\s+{_W}(?:all|any|every|the|your|my|previous|prior|above|"
     rf"earlier|preceding|existing|original|initial)\s+{_W}(?:instructions?|directives?|guidelines|"
     rf"system\s+(?:prompts?|messages?))\b"),
    ("ignore_instructions",
     r"\b(?:ignore|forget|disregard)\s+(?:everything|all)\s+(?:you\s+were\s+told|(?:said\s+)?above|before)\b"),
    ("disregard_system_prompt",
     rf"\bdisregard\s+{_W}(?:system\s+prompts?|instructions?|rules|guidelines|directives?|safety|policies|"
     rf"guardrails)\b"),
    ("role_override",
     r"\byou\s+are\s+now\s+(?!(?:ready|able|set|done|connected|logged|signed|authenticated|running|using|inside|"
     r"finished|all\s+set|good\s+to\s+go|in\s+the|on\s+the|at\s+the)\b)\w+"),
    ("role_override", r"\bfrom\s+now\s+on,?\s+you\s+(?:are|will\s+act\s+as|must\s+act\s+as)\b"),
    ("role_override", rf"\bpretend\s+{_W}(?:you\s+are|to\s+be)\s+(?:a|an|the)?\s*(?:unrestricted|jailbroken|DAN|"
                      rf"different\s+(?:AI|assistant|model)|evil|uncensored)\b"),
    ("role_override", r"\bact\s+as\s+(?:if|though)\s+you\s+(?:have|had)\s+no\s+(?:restrictions|limits|rules|"
                      r"guidelines)\b"),
    ("new_instructions", r"\b(?:new|updated|real|actual|revised)\s+(?:system\s+)?instructions?\s*:"),
    ("system_prompt_override",
     r"\bsystem\s+prompt\s+override\b|\boverride\s+(?:the\s+|your\s+)?system\s+prompt\b|"
     r"\b(?:replace|rewrite)\s+(?:the\s+|your\s+)system\s+prompt\b"),
    ("deception",
     r"\b(?:do\s+not|don't|never)\s+(?:tell|inform|let)\s+the\s+user\s+(?:about\s+(?:this|these)|that\s+you|know)\b|"
     r"\bwithout\s+(?:telling|informing)\s+the\s+user\b"),
    ("role_tag",
     r"<\s*/?\s*(?:system|assistant|developer|system[_-]prompt|im_start|im_end)\s*>|<\|\s*(?:system|user|"
     r"assistant|developer|im_start|im_end|endoftext)\s*\|>|<<\s*/?\s*SYS\s*>>|\[/?INST\]|"
     r"^[ \t]*#{1,6}[ \t]*(?:system|assistant|developer)(?:[ \t]+(?:prompt|message|instructions?))?[ \t]*:"),
]

# An HTML comment is invisible once rendered: flag it when it talks to the model.
_HIDDEN_COMMENT = re.compile(r"<!--(.{0,2000}?)-->", re.S)
_COMMENT_INSTRUCTION = re.compile(
    r"\b(?:ignore|disregard|override|instructions?|system\s+(?:prompt|message)|secret|hidden|exfiltrat\w*|"
    r"you\s+(?:must|should|are|will)|(?:do\s+not|don't|never)\s+(?:tell|mention|reveal)|execute|run\s+this)\b|"
    r"\b(?:assistant|system)\s*:",
    re.I)

# --- exfiltration --------------------------------------------------------------------------------------

_SECRET_WORD = (
    r"(?:api[\s_-]?keys?|access[\s_-]?keys?|secret[\s_-]?keys?|private[\s_-]?keys?|ssh[\s_-]?keys?|"
    r"(?<![\w.])\.ssh\b|id_rsa|id_ed25519|"
    r"tokens?\b(?!\s+(?:usage|counts?|limits?|budgets?|per\b|window|costs?|prices?|pricing))|"
    r"passwords?|passwd|passphrases?|secrets?|credentials?|creds\b|"
    r"(?<![\w.])\.env\b|env(?:ironment)?[\s_-]?(?:vars?|variables?|files?)|printenv|os\.environ|"
    r"session[\s_-]?cookies?|cookies?\s+jar)"
)
_SEND_VERB = (
    r"\b(?:send|sends|sending|sent|post|posts|posting|upload|uploads|uploading|transmit|transmits|forward|"
    r"forwards|exfiltrate|exfiltrates|leak|leaks|e-?mail|mail|deliver|paste|pastes|share|shares|dump|dumps|"
    r"copy|copies|push|pushes|report|reports|beacon|submit|submits)\b"
)
_DESTINATION = (
    r"(?:\bhttps?://\S+|\b[\w.+-]+@[\w-]+(?:\.[\w-]+)+\b|\bwebhooks?\b|\bpastebin\b|\brequestbin\b|"
    r"\bngrok\b|\bhookbin\b|\btransfer\.sh\b|\bwebhook\.site\b|\b\d{1,3}(?:\.\d{1,3}){3}(?::\d+)?\b)"
)
_SENT = (r"(?:sent|posted|uploaded|forwarded|e-?mailed|mailed|leaked|transmitted|delivered|shared|pasted|copied|"
         r"exfiltrated|pushed|reported|submitted)")
_EXFIL_PROSE: list[str] = [
    # "send the API key to http://…", "email all passwords to x@y.z", "upload ~/.ssh/id_rsa to a webhook"
    rf"{_SEND_VERB}\s+(?:[^\s]+\s+){{0,6}}?[^\s]{{0,40}}?{_SECRET_WORD}[^\n]{{0,200}}?{_DESTINATION}",
    # "the API key should be posted to https://…"
    rf"{_SECRET_WORD}\s+(?:[^\s]+\s+){{0,4}}?{_SENT}\b[^\n]{{0,200}}?{_DESTINATION}",
]

# An upper-case variable named like a secret ($OPENAI_API_KEY, ${GH_TOKEN}); case-sensitive, so $monkey is not.
_SECRET_VAR = r"(?-i:\$\{?[A-Z0-9_]*(?:KEY|TOKEN|SECRET|PASSWORD|PASSWD|PASS|CREDENTIALS?|COOKIE)S?\b\}?)"
_SECRET_FILE = (
    r"(?:~|\$HOME|\$\{HOME\})?/?[\w./-]*(?:\.ssh/[\w.-]+|id_rsa|id_ed25519|\.env\b|\.netrc|\.pgpass|\.npmrc|"
    r"\.pypirc|\.aws/credentials|\.git-credentials|/etc/shadow|/etc/passwd|\.hermes[\w-]*/\.env)"
)
_NET_TOOL = (r"\b(?:curl|wget|nc|ncat|netcat|socat|scp|rsync|ftp|sftp|https?(?=\s)|Invoke-WebRequest|Invoke-RestMethod|"
             r"iwr|irm)\b")  # `http` only as the HTTPie command, never the scheme of a URL
_ENV_DUMP = r"(?:\$\(|`)\s*(?:env|printenv|cat)\b"  # $(env), `printenv`, $(cat …)
_EXFIL_SHELL: list[str] = [
    # curl/wget/nc … $OPENAI_API_KEY  (any secret-named variable handed to a network tool)
    rf"{_NET_TOOL}[^\n]{{0,400}}?{_SECRET_VAR}",
    rf"{_SECRET_VAR}[^\n]{{0,200}}?\|\s*{_NET_TOOL}",
    # wget --post-data/--post-file or curl -d/-F/--data/-T with a secret file, env dump or secret word
    rf"\bwget\b[^\n]{{0,400}}?--post-(?:data|file)[=\s][^\n]{{0,200}}?"
    rf"(?:{_SECRET_FILE}|{_ENV_DUMP}|{_SECRET_WORD})",
    rf"\bcurl\b[^\n]{{0,400}}?(?:\s-d|\s-F|--data[\w-]*|--form|--upload-file|\s-T)[=\s]+[^\n]{{0,200}}?"
    rf"(?:@?{_SECRET_FILE}|{_ENV_DUMP})",
    # env / printenv / cat ~/.ssh/id_rsa | curl …
    rf"\b(?:env|printenv|set)\b\s*\|\s*(?:[\w-]+\s*\|\s*)?{_NET_TOOL}",
    rf"\bcat\s+{_SECRET_FILE}[^\n|]{{0,100}}\|\s*(?:[\w-]+\s*\|\s*)?{_NET_TOOL}",
]

# Secrets in clear: `hermes_engine.policy.secrets.find_secrets`, the very spans its `redact` replaces.

# --- destructive shell (skills only) -------------------------------------------------------------------

_ROOTISH = (r"(?:/|/\*|~/?\*?|\$HOME/?\*?|\$\{HOME\}/?|\*|"
            r"/(?:bin|boot|dev|etc|home|lib|lib64|opt|root|sbin|srv|usr|var|System|Users)/?\*?)")
_DESTRUCTIVE: list[tuple[str, str]] = [
    ("destructive_command",
     rf"\brm\s+(?:-[-\w]+\s+)*(?:-\w*[rR]\w*|--recursive)\s+(?:-[-\w]+\s+)*{_ROOTISH}(?=$|[\s;&|)'\"`])"),
    ("destructive_command", r"\brm\b[^\n]{0,100}--no-preserve-root"),
    ("destructive_command", r"\bmkfs(?:\.\w+)?\s+"),
    ("destructive_command", r"\bdd\b[^\n]{0,200}\bof=/dev/(?:sd|hd|vd|xvd|nvme|mmcblk|disk|rdisk)\w*"),
    ("destructive_command", r">\s*/dev/(?:sd|hd|vd|xvd|nvme|mmcblk)[a-z]?\d*\b"),
    ("destructive_command", r"\bchmod\s+-R\s+0?777\s+/(?=$|\s)"),
    ("destructive_command", r"\b(?:shred|wipefs)\b[^\n]{0,80}/dev/\w+"),
    ("fork_bomb", r"(?P<fb>:|\b\w+)\s*\(\s*\)\s*\{\s*(?P=fb)\s*\|\s*(?P=fb)\s*&\s*\}\s*;\s*(?P=fb)"),
    ("pipe_to_shell",
     r"\b(?:curl|wget|fetch|iwr|Invoke-WebRequest)\b[^\n|]{0,400}\|\s*(?:sudo\s+(?:-\w+\s+)*)?"
     r"(?:ba|z|k|da|fi)?sh\b"),
    ("pipe_to_shell", r"\b(?:ba|z)?sh\s+(?:-c\s+)?[\"']?(?:<\(|\$\()\s*(?:curl|wget)\b"),
    ("pipe_to_shell", r"\b(?:curl|wget)\b[^\n|]{0,400}\|\s*(?:sudo\s+)?python[\d.]*\s*(?:-\s*)?(?=$|[\s;&|])"),
]

_FLAGS = re.I | re.M


def _compile(rules: list[tuple[str, str]]) -> list[tuple[str, re.Pattern[str]]]:
    return [(rule, re.compile(pattern, _FLAGS)) for rule, pattern in rules]


_COMPILED: dict[str, list[tuple[str, re.Pattern[str]]]] = {
    "injection": _compile(_INJECTION),
    "exfil": _compile([("exfiltration", p) for p in _EXFIL_PROSE + _EXFIL_SHELL]),
    "destructive": _compile(_DESTRUCTIVE),
}

KINDS = ("memory", "skill")
RULES: dict[str, str] = {
    "ignore_instructions": "a prompt injection (telling the model to ignore its instructions)",
    "disregard_system_prompt": "a prompt injection (telling the model to disregard its rules)",
    "role_override": "a prompt injection (trying to give the model a new identity)",
    "new_instructions": "a prompt injection (smuggling in new instructions)",
    "system_prompt_override": "a prompt injection (overriding the system prompt)",
    "deception": "a prompt injection (hiding things from the user)",
    "role_tag": "a prompt injection (fake system or assistant role markers)",
    "hidden_comment": "hidden instructions in an HTML comment",
    "invisible_unicode": "invisible Unicode characters that can hide instructions",
    "exfiltration": "an attempt to send secrets or credentials somewhere",
    "secret": "a secret (API key, token or private key) in clear text",
    "destructive_command": "a destructive shell command",
    "fork_bomb": "a fork bomb",
    "pipe_to_shell": "a command that pipes a download straight into a shell",
}

_EXCERPT_CHARS = 60


def _excerpt(text: str) -> str:
    text = " ".join(text.split())
    return text if len(text) <= _EXCERPT_CHARS else text[: _EXCERPT_CHARS - 1] + "…"


def _codepoints(chars: str) -> str:
    seen = sorted({ord(c) for c in chars})
    listed = ", ".join(f"U+{c:04X}" for c in seen[:5])
    return listed + (", …" if len(seen) > 5 else "")


def scan_text(text: str, *, kind: str = "memory") -> list[Finding]:
    """Every problem found in `text`, in order of appearance (one finding per rule and excerpt).

    `kind` is "memory" (injection, hidden instructions, exfiltration, secrets) or "skill" (all of those plus
    destructive shell commands). An empty list means the text may be saved.
    """
    if kind not in KINDS:
        raise ValueError(f"scan_text: kind must be one of {KINDS}, not {kind!r}")
    if not text:
        return []
    hits: list[tuple[int, Finding]] = []

    invisible = _INVISIBLE.findall(text)
    if invisible:
        first = _INVISIBLE.search(text)
        hits.append((first.start() if first else 0, Finding("invisible_unicode", _codepoints("".join(invisible)))))

    # Match on a folded copy: invisible characters removed (so "ig\u200bnore" still reads "ignore") and
    # NFKC applied (full-width "ｉｇｎｏｒｅ" → "ignore").
    folded = unicodedata.normalize("NFKC", _INVISIBLE.sub("", text))

    # Secrets are found once; they become findings of their own and are masked in every other excerpt.
    found = find_secrets(folded)

    def excerpt(match: re.Match[str]) -> str:
        return _excerpt(mask(folded, found, match.start(), match.end()))

    hits.extend((secret.start, Finding("secret", secret.describe())) for secret in found)
    groups = ["injection", "exfil"] + (["destructive"] if kind == "skill" else [])
    for group in groups:
        for rule, pattern in _COMPILED[group]:
            for match in pattern.finditer(folded):
                hits.append((match.start(), Finding(rule, excerpt(match))))

    for match in _HIDDEN_COMMENT.finditer(folded):
        if _COMMENT_INSTRUCTION.search(match.group(1)):
            hits.append((match.start(), Finding("hidden_comment", excerpt(match))))

    hits.sort(key=lambda h: h[0])
    seen: set[Finding] = set()
    findings: list[Finding] = []
    for _, finding in hits:
        if finding not in seen:
            seen.add(finding)
            findings.append(finding)
    return findings


def explain(findings: Iterable[Finding]) -> str:
    """One sentence for the model saying why the content was blocked."""
    findings = list(findings)
    if not findings:
        return "Nothing was blocked."
    reasons: list[str] = []
    for f in findings:
        what = RULES.get(f.rule, f"a suspicious pattern ({f.rule})")
        reason = f'{what}: "{f.excerpt}"' if f.excerpt else what
        if not any(r.startswith(what) for r in reasons):
            reasons.append(reason)
    listed = reasons[0] if len(reasons) == 1 else "; ".join(reasons[:-1]) + "; and " + reasons[-1]
    return (f"Blocked because it contains {listed} — saved text enters future system prompts, so store only "
            f"plain declarative facts or procedures without such content.")
