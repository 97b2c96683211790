"""Skills: procedures the agent saves and reuses (`<HERMES_HOME>/skills/<bot>/<category>/<name>/SKILL.md`).

model (parse/validate) · contract (the `SkillLibrary` Protocol) · library (which library a bot has) ·
folders/files (a library kept as folders: read, write) · database (one kept in the database) · confine
(paths stay in their skill) · approvals (writes waiting for an admin) · tools (skill_view, skills_list,
skill_manage) · index, hints, ranking, embeddings (the prompt index and per-message hints) · usage ·
curator, report · feature. The operator's commands are `hermes_gateway/cli/skills.py` and `curator.py`.
"""

from hermes_engine.skills.curator import Curator, CuratorReport, latest_report
from hermes_engine.skills.feature import SkillsFeature
from hermes_engine.skills.index import HintRanker, render_index, token_budget
from hermes_engine.skills.library import (
    ChangeResult,
    FileSkillLibrary,
    GatedLibrary,
    PendingQueue,
    SkillChange,
    SkillLibrary,
    library_root,
)
from hermes_engine.skills.model import Skill, SkillBlocked, SkillError, parse_skill
from hermes_engine.skills.tools import TOOLS, skill_manage, skill_view, skills_list
from hermes_engine.skills.usage import SkillUsage, UsageLog

__all__ = [
    "ChangeResult", "Curator", "CuratorReport", "FileSkillLibrary", "GatedLibrary", "HintRanker", "PendingQueue",
    "Skill", "SkillBlocked", "SkillChange", "SkillError", "SkillLibrary", "SkillUsage", "SkillsFeature", "TOOLS",
    "UsageLog", "latest_report", "library_root", "parse_skill", "render_index", "skill_manage", "skill_view",
    "skills_list", "token_budget",
]
