"""A skill: one folder `<category>/<name>/` holding `SKILL.md` (YAML front matter + Markdown body) and
optional supporting files under `references/`, `templates/`, `scripts/` and `assets/` (the folders Hermes
Agent's skills use). This module parses and validates; it never touches disk.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from pathlib import Path, PurePosixPath
from typing import Any

import frontmatter
import yaml

from hermes_engine.errors import HermesError

NAME_RE = re.compile(r"^[a-z0-9][a-z0-9-]{0,63}$")
MAX_SKILL_CHARS = 100_000  # as Hermes Agent; longer material belongs in references/ files
MAX_FILE_BYTES = 256 * 1024
MAX_DESCRIPTION_CHARS = 1024
SUPPORT_DIRS = ("references", "templates", "scripts", "assets")
SECTIONS = ("When to use", "Steps", "Pitfalls")
AUTHORS = ("user", "agent")
DEFAULT_CATEGORY = "general"
MAX_TRIGGERS = 12  # example requests a skill serves (front matter `triggers`), indexed for hints
MAX_TRIGGER_CHARS = 200
MAX_TOOLS = 16  # tools a skill's steps call (front matter `tools`)
TOOL_NAME_RE = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.-]{0,63}$")


class SkillError(HermesError):
    """A skill operation was refused; the message says why in one or two sentences for the model."""


class SkillBlocked(SkillError):
    """The security scan refused the content; nothing was written."""

    def __init__(self, message: str, findings: list[Any] | None = None) -> None:
        super().__init__(message)
        self.findings = list(findings or [])


@dataclass(frozen=True)
class Skill:
    name: str
    description: str
    category: str = DEFAULT_CATEGORY
    version: str = "1.0.0"
    tags: tuple[str, ...] = ()
    created_by: str = "user"  # a hand-written file without the field is the user's, never curated away
    platforms: tuple[str, ...] = ()
    body: str = ""
    text: str = ""  # the whole SKILL.md as stored
    meta: dict[str, Any] = field(default_factory=dict, compare=False)
    path: Path | None = field(default=None, compare=False)  # the skill folder
    updated_at: float = field(default=0.0, compare=False)  # mtime of SKILL.md (seconds since epoch)
    files: tuple[str, ...] = ()  # supporting files, relative ("references/x.md")
    triggers: tuple[str, ...] = ()  # example requests the skill serves, in the asker's words
    tools: tuple[str, ...] = ()  # the tools its steps call; names this bot lacks are kept, and flagged on view

    @property
    def when_to_use(self) -> str:
        return section(self.body, "When to use")

    @property
    def pitfalls(self) -> list[str]:
        return bullets(section(self.body, "Pitfalls"))

    @property
    def agent_written(self) -> bool:
        return self.created_by == "agent"

    def missing_sections(self) -> list[str]:
        have = {h.lower() for h in headings(self.body)}
        return [s for s in SECTIONS if s.lower() not in have]


def validate_name(name: Any, what: str = "skill name") -> str:
    if not isinstance(name, str) or not NAME_RE.match(name):
        shown = repr(name)[:80]
        raise SkillError(f"Invalid {what} {shown}: use 1-64 lowercase letters, digits and hyphens, "
                         f"starting with a letter or digit (e.g. 'docker-build-cache').")
    return name


def validate_category(category: Any) -> str:
    if category in (None, ""):
        return DEFAULT_CATEGORY
    return validate_name(category, "category")


def validate_file_path(file_path: Any) -> PurePosixPath:
    """A supporting file path: relative, no traversal, under one of `SUPPORT_DIRS`."""
    if not isinstance(file_path, str) or not file_path.strip():
        raise SkillError("file_path is required, e.g. 'references/api.md'.")
    raw = file_path.strip()
    if "\\" in raw or "\x00" in raw:
        raise SkillError(f"Invalid file_path {raw!r}: use forward slashes.")
    path = PurePosixPath(raw)
    if path.is_absolute() or raw.startswith("~"):
        raise SkillError(f"Invalid file_path {raw!r}: must be relative to the skill folder.")
    if any(part in ("..", ".", "") for part in path.parts) or ".." in raw.split("/"):
        raise SkillError(f"Invalid file_path {raw!r}: '..' and '.' are not allowed.")
    if len(path.parts) < 2 or path.parts[0] not in SUPPORT_DIRS:
        raise SkillError(f"Invalid file_path {raw!r}: files go under {', '.join(d + '/' for d in SUPPORT_DIRS)} "
                         f"(e.g. 'references/notes.md').")
    if any(part.startswith(".") for part in path.parts) or len(raw) > 200:
        raise SkillError(f"Invalid file_path {raw!r}: no hidden files, at most 200 characters.")
    return path


def check_size(text: str, limit: int, what: str) -> bytes:
    data = text.encode("utf-8")
    if len(data) > limit:
        raise SkillError(f"{what} is {len(data) // 1024} KB; the limit is {limit // 1024} KB. "
                         f"Move long material into references/ files or shorten it.")
    return data


def check_skill_length(text: str) -> None:
    if len(text) > MAX_SKILL_CHARS:
        raise SkillError(f"SKILL.md is {len(text):,} characters; the limit is {MAX_SKILL_CHARS:,}. Keep the "
                         f"procedure in SKILL.md and move long reference material into references/ files "
                         f"(skill_manage write_file), then point to them from the body.")


def _as_tuple(value: Any, key: str) -> tuple[str, ...]:
    if value is None:
        return ()
    if isinstance(value, str):
        return tuple(v.strip() for v in value.split(",") if v.strip())
    if isinstance(value, (list, tuple)) and all(isinstance(v, (str, int, float)) for v in value):
        return tuple(str(v).strip() for v in value if str(v).strip())
    raise SkillError(f"Front matter field '{key}' must be a list of strings.")


def parse_triggers(value: Any) -> tuple[str, ...]:
    """Front matter `triggers`: a short list of example requests (a single string is one request)."""
    if isinstance(value, str):
        value = [value]
    triggers = _as_tuple(value, "triggers")
    if len(triggers) > MAX_TRIGGERS:
        raise SkillError(f"Front matter 'triggers' has {len(triggers)} entries; keep at most {MAX_TRIGGERS} "
                         f"short example requests.")
    for t in triggers:
        if len(t) > MAX_TRIGGER_CHARS or "\n" in t:
            raise SkillError(f"Each trigger is one example request on one line, at most {MAX_TRIGGER_CHARS} "
                             f"characters; {t[:40]!r}... is not.")
    return tuple(" ".join(t.split()) for t in triggers)


def parse_tools(value: Any) -> tuple[str, ...]:
    """Front matter `tools`: names of the tools the steps call, each once. A name this bot does not have is
    kept (the skill may come from another bot, or the tool may be added later); `skill_view` flags it."""
    names = _as_tuple(value, "tools")
    if len(names) > MAX_TOOLS:
        raise SkillError(f"Front matter 'tools' names {len(names)} tools; keep at most {MAX_TOOLS}.")
    for name in names:
        if not TOOL_NAME_RE.match(name):
            raise SkillError(f"Front matter 'tools' holds {name[:40]!r}, which is not a tool name (e.g. "
                             f"'terminal', 'read_file').")
    return tuple(dict.fromkeys(names))


def parse_skill(text: str, *, folder_name: str | None = None, category: str | None = None,
                path: Path | None = None, updated_at: float = 0.0, files: tuple[str, ...] = ()) -> Skill:
    """Parse and validate SKILL.md text. Raises `SkillError` with a message fit for the model."""
    if not isinstance(text, str) or not text.strip():
        raise SkillError("SKILL.md content is empty.")
    check_skill_length(text)
    if not text.lstrip("\ufeff").startswith("---"):
        raise SkillError("SKILL.md must start with YAML front matter between '---' lines, holding at least "
                         "name and description.")
    try:
        post = frontmatter.loads(text)
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        where = f" (line {mark.line + 1})" if mark else ""
        problem = getattr(exc, "problem", None) or "syntax error"
        raise SkillError(f"The front matter is not valid YAML{where}: {problem}.") from None
    except Exception as exc:  # python-frontmatter raises plain errors for non-mapping front matter
        raise SkillError(f"The front matter could not be read: {exc}.") from None
    meta = dict(post.metadata)
    if not meta:
        raise SkillError("The front matter is empty or not a YAML mapping; it needs name and description.")
    name = meta.get("name")
    if name is None:
        raise SkillError("The front matter has no 'name'.")
    name = validate_name(str(name))
    if folder_name is not None and name != folder_name:
        raise SkillError(f"The front matter name '{name}' does not match the skill name '{folder_name}'.")
    description = meta.get("description")
    if not isinstance(description, str) or not description.strip():
        raise SkillError("The front matter needs a non-empty 'description' (one line: what it does and when).")
    description = " ".join(description.split())
    if len(description) > MAX_DESCRIPTION_CHARS:
        raise SkillError(f"The description is {len(description)} characters; keep it under "
                         f"{MAX_DESCRIPTION_CHARS}.")
    created_by = str(meta.get("created_by") or "user")
    if created_by not in AUTHORS:
        raise SkillError("Front matter 'created_by' must be 'user' or 'agent'.")
    version = meta.get("version", "1.0.0")
    if not isinstance(version, (str, int, float)):
        raise SkillError("Front matter 'version' must be a string such as '1.0.0'.")
    cat = category if category is not None else validate_category(meta.get("category"))
    return Skill(
        name=name,
        description=description,
        category=cat,
        version=str(version),
        tags=_as_tuple(meta.get("tags"), "tags"),
        created_by=created_by,
        platforms=_as_tuple(meta.get("platforms"), "platforms"),
        body=post.content,
        text=text,
        meta=meta,
        path=path,
        updated_at=updated_at,
        files=files,
        triggers=parse_triggers(meta.get("triggers")),
        tools=parse_tools(meta.get("tools")),
    )


def render(meta: dict[str, Any], body: str) -> str:
    """SKILL.md text from front matter and body (key order kept)."""
    head = yaml.safe_dump(meta, sort_keys=False, allow_unicode=True, default_flow_style=None, width=1000)
    return f"---\n{head}---\n\n{body.strip()}\n"


def with_meta(text: str, **updates: Any) -> str:
    """The same SKILL.md with some front matter fields set; unchanged text when nothing differs."""
    post = frontmatter.loads(text)
    meta = dict(post.metadata)
    if all(meta.get(k) == v for k, v in updates.items()):
        return text
    meta.update(updates)
    return render(meta, post.content)


_HEADING = re.compile(r"^(#{1,6})\s+(.+?)\s*#*\s*$", re.M)


def headings(body: str) -> list[str]:
    return [m.group(2).strip() for m in _HEADING.finditer(body)]


def _section_span(body: str, title: str) -> tuple[int, int] | None:
    """Where the text under a `## title` heading (case-insensitive) starts and ends: up to the next heading
    of the same or higher level."""
    matches = list(_HEADING.finditer(body))
    for i, m in enumerate(matches):
        if m.group(2).strip().lower() == title.lower():
            level = len(m.group(1))
            end = next((n.start() for n in matches[i + 1:] if len(n.group(1)) <= level), len(body))
            return m.end(), end
    return None


def section(body: str, title: str) -> str:
    """The text under a `## title` heading (case-insensitive) up to the next heading of the same or higher level."""
    span = _section_span(body, title)
    return body[span[0]:span[1]].strip() if span else ""


def replace_section(body: str, title: str, new_text: str) -> str:
    """Body with the text under `## title` replaced (appended as a new section when missing)."""
    span = _section_span(body, title)
    if span:
        tail = body[span[1]:]
        return body[:span[0]] + "\n" + new_text.strip() + "\n" + ("\n" + tail if tail else "")
    return body.rstrip() + f"\n\n## {title}\n{new_text.strip()}\n"


_BULLET = re.compile(r"^\s*(?:[-*+]|\d+[.)])\s+(.*)$")


def bullets(text: str) -> list[str]:
    """List items of a Markdown section (continuation lines joined); a plain paragraph counts as one item."""
    items: list[str] = []
    for line in text.splitlines():
        m = _BULLET.match(line)
        if m:
            items.append(m.group(1).strip())
        elif line.strip() and items and line.startswith((" ", "\t")):
            items[-1] += " " + line.strip()
        elif line.strip():
            items.append(line.strip())
    return [i for i in items if i]


def skill_template(name: str, description: str, *, category: str = DEFAULT_CATEGORY,
                   created_by: str = "agent") -> str:
    """A skeleton SKILL.md (used by docs/tests; the model writes its own)."""
    meta = {"name": name, "description": description, "version": "1.0.0", "category": category,
            "tags": [], "created_by": created_by}
    return render(meta, "## When to use\n\n## Steps\n1. \n\n## Pitfalls\n- \n")
