"""The "skills" toolset, with Hermes Agent's names and argument shapes: skill_view, skills_list, skill_manage.

Tools find the library through `ctx.services` (`SKILLS`): a `SkillLibraries` (the `SkillsFeature`, which
serves one library per bot profile) or a single `SkillLibrary` (one bot, tests). Both are declared
Protocols, so a service that fits neither is reported as "not enabled" instead of failing mid-call.
Inside the background review (`ctx.in_review`) writes go through `review_gate`: the review is a guest in
the library. A skill is the person's (`created_by: user`, never curated away) when the model says the person
asked for it (`requested_by_person`); the review has no person to ask, so it cannot say so. A turn whose
session read untrusted content (`ctx.untrusted`) asks for its writes to be scanned strictly.
Tool docstrings are the schemas the model pays for on every request: keep them short.
"""

from __future__ import annotations

from typing import Any, Literal, Protocol, runtime_checkable

from hermes_engine.policy.security import ScanMode
from hermes_engine.ports.services import ServiceKey
from hermes_engine.ports.tools import Tool, ToolContext, ToolResult
from hermes_engine.skills.approvals import review_gate
from hermes_engine.skills.contract import SkillChange, SkillLibrary
from hermes_engine.skills.model import SkillError
from hermes_engine.tools.registry import tool


@runtime_checkable
class SkillLibraries(Protocol):
    """What the tools need from a skills service that serves several bots: the library of one bot.

    The tools own this contract; the skills feature implements it."""

    def library_for(self, bot: str | None = None) -> SkillLibrary:
        """The library `bot`'s agent reads and writes (possibly behind an approval gate)."""


@runtime_checkable
class ToolCatalog(Protocol):
    """What `skill_view` asks to flag a skill's tools this bot lacks; the skills feature implements it."""

    def tool_names(self) -> frozenset[str] | None:
        """The bot's tool names (None: not known yet)."""


SKILLS: ServiceKey[SkillLibraries | SkillLibrary] = ServiceKey("skills")


def missing_tools(ctx: ToolContext, tools: tuple[str, ...]) -> list[str]:
    service = ctx.services.get(SKILLS)
    names = service.tool_names() if isinstance(service, ToolCatalog) else None
    return [] if names is None else [t for t in tools if t not in names]


def library_of(ctx: ToolContext) -> SkillLibrary:
    service = ctx.services.get(SKILLS)
    if isinstance(service, SkillLibraries):
        return service.library_for(ctx.bot)
    if isinstance(service, SkillLibrary):
        return service
    raise SkillError("Skills are not enabled for this bot.")


@tool(toolset="skills")
async def skill_view(ctx: ToolContext, name: str, file_path: str | None = None) -> ToolResult:
    """Load a skill's full instructions (SKILL.md), or one of its supporting files.

    Args:
      name: skill name
      file_path: optional file inside the skill, e.g. references/api.md
    """
    try:
        library = library_of(ctx)
        if file_path:
            return ToolResult(await library.read_file(name, file_path))
        skill = await library.get(name)
        if skill is None:
            raise SkillError(f"No skill named {name!r}. Use skills_list to see the available skills.")
    except SkillError as exc:
        return ToolResult(str(exc), is_error=True)
    text = skill.text.rstrip() + "\n"
    if missing := missing_tools(ctx, skill.tools):
        text += (f"\n[this bot has no {', '.join(missing)}: the steps that call "
                 f"{'it' if len(missing) == 1 else 'them'} cannot run here]\n")
    if skill.files:
        text += f"\n[files: {', '.join(skill.files)} — read with skill_view(name, file_path)]\n"
    return ToolResult(text)


@tool(toolset="skills")
async def skills_list(ctx: ToolContext, category: str | None = None) -> ToolResult:
    """List saved skills with their descriptions.

    Args:
      category: only this category
    """
    try:
        library = library_of(ctx)
        skills = await library.list_skills(category or None)
        if not skills and category:
            categories = sorted({s.category for s in await library.list_skills()})
            raise SkillError(f"No skills in category {category!r}. Categories: {', '.join(categories) or 'none'}.")
    except SkillError as exc:
        return ToolResult(str(exc), is_error=True)
    if not skills:
        return ToolResult("No skills saved yet.")
    lines = [f"{len(skills)} skill(s):"]
    lines += [f"- {s.name} [{s.category}]: {s.description}" for s in skills]
    return ToolResult("\n".join(lines))


@tool(toolset="skills")
async def skill_manage(
    ctx: ToolContext,
    action: Literal["create", "patch", "edit", "delete", "write_file", "remove_file"],
    name: str,
    content: str | None = None,
    category: str | None = None,
    old_string: str | None = None,
    new_string: str | None = None,
    replace_all: bool = False,
    file_path: str | None = None,
    file_content: str | None = None,
    absorbed_into: str | None = None,
    requested_by_person: bool = False,
) -> ToolResult:
    """Save or change a reusable skill. SKILL.md = YAML front matter (name, description, version, category, tags, triggers: 2-5 short example requests in the asker's words, tools: names of the tools its steps call) then sections ## When to use, ## Steps, ## Pitfalls. Prefer patch for small fixes.

    Args:
      action: create(name, content, category) | patch(name, old_string, new_string) | edit(name, content) | delete(name) | write_file/remove_file(name, file_path, file_content)
      name: lowercase-hyphenated skill name
      content: the full SKILL.md
      category: folder for a new skill, e.g. devops
      old_string: exact text to replace; must occur once unless replace_all
      new_string: replacement text
      replace_all: patch every occurrence
      file_path: references/, templates/, scripts/ or assets/<file>
      file_content: text of that file
      absorbed_into: delete: the skill that now holds this one's content
      requested_by_person: true only if the person explicitly asked for this skill
    """
    change = SkillChange(action=action, name=name, content=content, category=category, old_string=old_string,
                         new_string=new_string, file_path=file_path, file_content=file_content,
                         replace_all=replace_all, absorbed_into=absorbed_into,
                         scan_mode=ScanMode(strict=ctx.untrusted))
    requested_by: dict[str, Any] = {"bot": ctx.bot, "session_key": ctx.session_key, "person_id": ctx.person_id,
                                    "in_review": ctx.in_review}
    try:
        library = library_of(ctx)
        if ctx.in_review:
            if requested_by_person:
                raise SkillError("requested_by_person cannot be set in the background review: only a person in "
                                 "the conversation can ask for a skill. Call again without it.")
            library = review_gate(library)
        author = "user" if requested_by_person else "agent"
        result = await library.apply(change, author=author, requested_by=requested_by)
    except SkillError as exc:
        return ToolResult(str(exc), is_error=True)
    return ToolResult(result.text())


TOOLS: list[Tool] = [skill_view, skills_list, skill_manage]

__all__ = ["TOOLS", "SkillLibraries", "ToolCatalog", "missing_tools", "library_of", "skill_manage", "skill_view", "skills_list"]
