"""How a bot profile declares MCP servers (`mcp_servers:`), checked when the profile loads.

Secrets never live in the profile: a value in `env` or `headers` may hold `${NAME}` references, filled
from the gateway's environment when the server starts (a reference to an unset variable is a config
error naming it); a literal that looks like a secret, or a literal value for a credential's name
(`Authorization`, `*_TOKEN`, `*_API_KEY`, ...), is refused when the profile loads. A stdio server gets
those and the SDK's short list of safe variables (PATH, HOME, ...), never the rest of the gateway's
environment (its API keys).

A stdio server runs in the terminal's sandbox unless `sandbox: false`: its own uid (for a root gateway), a
folder of its own as its home, the system folders and its program's installation read-only, and only the
host paths listed in `read_paths` and `write_paths`; never the gateway's home, database or process. No
network unless `network: true` (the internet through slirp4netns, never this host's 127.0.0.1, where the
gateway, its database and other servers listen). `memory_mb` and `processes` bound the server's whole process
tree (a cgroup where one can be made, else per process and per uid); left out, they are the profile's
`workspace` limits. `sandbox: false` is for a server trusted with everything the gateway's user may read.
"""

from __future__ import annotations

import os
import re
from collections.abc import Mapping
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator

from hermes_engine.errors import ConfigError
from hermes_engine.secrets import find_secrets

_REFERENCE = re.compile(r"\$\{([A-Za-z_][A-Za-z0-9_]*)\}")
# A header or variable by such a name carries a credential: its value must come from the environment.
_CREDENTIAL = re.compile(r"authorization|token|secret|password|passwd|api[_-]?key|cookie|credential", re.I)
SERVER_NAME = re.compile(r"^[A-Za-z0-9_-]{1,32}$")


class McpAccess(BaseModel):
    """Who may call a server's tools: everyone the bot serves, its allowed people (listed or approved
    through pairing; not everyone a Slack workspace lets in) or only its admins; in DMs or also groups."""

    model_config = ConfigDict(extra="forbid")

    people: Literal["everyone", "allowed", "admins"] = "everyone"
    chats: Literal["dm", "all"] = "all"


class McpServerSettings(BaseModel):
    """One server: `command` (stdio, with args/env/cwd) or `url` (Streamable HTTP, with headers)."""

    model_config = ConfigDict(extra="forbid")

    command: str | None = None
    args: list[str] = Field(default_factory=list)
    env: dict[str, str] = Field(default_factory=dict)
    cwd: str | None = None
    url: str | None = None
    headers: dict[str, str] = Field(default_factory=dict)
    include: list[str] = Field(default_factory=list)  # only these tools (server's names); empty: all
    exclude: list[str] = Field(default_factory=list)
    timeout: float = Field(60.0, gt=0)  # seconds per call
    start_timeout: float = Field(30.0, gt=0)  # seconds to start and list tools
    max_result_chars: int = Field(20_000, ge=1000)
    access: McpAccess = Field(default_factory=McpAccess)
    # Tools that act on the world wait for approval (the terminal's gate): every tool of the server
    # (`approval: always`) or the ones listed in `approve_tools` (the server's names).
    approval: Literal["never", "always"] = "never"
    approve_tools: list[str] = Field(default_factory=list)
    sandbox: bool = True  # stdio only: false runs the server as the gateway's own user, seeing all it sees
    read_paths: list[str] = Field(default_factory=list)  # host paths a sandboxed server may read, at their place
    write_paths: list[str] = Field(default_factory=list)  # and those it may also change
    network: bool = False  # a sandboxed stdio server's own network (slirp4netns), never the host's loopback
    memory_mb: int | None = Field(None, ge=64)  # a sandboxed stdio server's tree; None: the profile's workspace
    processes: int | None = Field(None, ge=8)

    @model_validator(mode="after")
    def _one_transport(self) -> McpServerSettings:
        if (self.command is None) == (self.url is None):
            raise ValueError("give either command (stdio) or url (Streamable HTTP)")
        if self.url is not None and not self.url.startswith(("http://", "https://")):
            raise ValueError("url must start with http:// or https://")
        if self.approval == "always" and self.approve_tools:
            raise ValueError("approve_tools lists tools for approval: never; with approval: always every tool "
                             "asks already")
        granted = [*self.read_paths, *self.write_paths]
        if granted and (self.command is None or not self.sandbox):
            raise ValueError("read_paths and write_paths are what a sandboxed stdio server may see; this server "
                             "has no sandbox")
        confined = [name for name, given in (("network", self.network), ("memory_mb", self.memory_mb is not None),
                                             ("processes", self.processes is not None)) if given]
        if confined and (self.command is None or not self.sandbox):
            raise ValueError(f"{' and '.join(confined)} are for a sandboxed stdio server; this server has no "
                             "sandbox")
        relative = next((p for p in granted if not os.path.isabs(p)), None)
        if relative is not None:
            raise ValueError(f"read_paths and write_paths must be absolute paths (got {relative!r})")
        if self.sandbox and self.cwd is not None and not any(_within(self.cwd, p) for p in granted):
            raise ValueError(f"cwd {self.cwd} is outside what the sandboxed server may see: list it in read_paths "
                             "or write_paths (without cwd it starts in its own folder)")
        hidden = sorted(set(self.approve_tools) & set(self.exclude))
        if hidden:
            raise ValueError(f"approve_tools names excluded tools: {', '.join(hidden)}")
        return self

    def needs_approval(self, tool: str) -> bool:
        return self.approval == "always" or tool in self.approve_tools

    @field_validator("env", "headers")
    @classmethod
    def _string_values(cls, value: dict[str, str]) -> dict[str, str]:
        for key, text in value.items():
            if "$" in text.replace("${", "") or text.count("${") != len(_REFERENCE.findall(text)):
                raise ValueError(f"{key}: write environment references as ${{NAME}}")
            literal = _REFERENCE.sub("", text)
            if (_CREDENTIAL.search(key) and literal.strip() and not _REFERENCE.search(text)) or find_secrets(literal):
                raise ValueError(f"{key}: a secret does not belong in the profile; set it in the gateway's "
                                 f"environment and write ${{NAME}} here")
        return value

    def missing_variables(self, environ: Mapping[str, str] | None = None) -> list[str]:
        environ = os.environ if environ is None else environ
        texts = [*self.env.values(), *self.headers.values()]
        return sorted({name for text in texts for name in _REFERENCE.findall(text) if name not in environ})

    def resolved_env(self, environ: Mapping[str, str] | None = None) -> dict[str, str]:
        return {k: resolve(v, environ) for k, v in self.env.items()}

    def resolved_headers(self, environ: Mapping[str, str] | None = None) -> dict[str, str]:
        return {k: resolve(v, environ) for k, v in self.headers.items()}


def _within(path: str, folder: str) -> bool:
    return os.path.commonpath([os.path.normpath(path), os.path.normpath(folder)]) == os.path.normpath(folder)


def resolve(text: str, environ: Mapping[str, str] | None = None) -> str:
    environ = os.environ if environ is None else environ

    def fill(match: re.Match[str]) -> str:
        name = match.group(1)
        if name not in environ:
            raise ConfigError(f"Environment variable {name} is not set (an MCP server setting refers to it).")
        return environ[name]

    return _REFERENCE.sub(fill, text)


def check_server_names(servers: Mapping[str, McpServerSettings]) -> None:
    for name in servers:
        if not SERVER_NAME.match(name):
            raise ValueError(f"MCP server name {name!r} must be 1-32 letters, digits, _ or -")
