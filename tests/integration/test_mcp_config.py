"""MCP server settings in a bot profile: checked when the profile loads, one sentence per problem, and
`hermes-gateway mcp list` starting the servers and printing their tools."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest
import yaml
from cli_kit import cli, invoke_beside
from test_configuration import assert_one_sentence

from hermes_engine.config import load_profile
from hermes_engine.errors import ConfigError

FAKE_SERVER = str(Path(__file__).parent.parent / "fakes" / "mcp_server.py")


def write_profile(folder: Path, servers: dict[str, object], **extra: object) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "profile.yaml").write_text(yaml.safe_dump({"model": "openai:gpt-test", "mcp_servers": servers,
                                                         **extra}), encoding="utf-8")
    return folder


@pytest.mark.parametrize(("server", "says"), [
    ({"command": "x", "url": "http://127.0.0.1:1/mcp"}, "give either command (stdio) or url"),
    ({"args": ["x"]}, "give either command (stdio) or url"),
    ({"url": "ftp://host/mcp"}, "url must start with http:// or https://"),
    ({"command": "x", "env": {"TOKEN": "$TOKEN"}}, "write environment references as ${NAME}"),
    ({"command": "x", "env": {"GITHUB_TOKEN": "ghp_abcdefghijklmnopqrstuvwxyz0123456789"}},
     "a secret does not belong in the profile"),
    ({"command": "x", "env": {"SEARCH_API_KEY": "plain-value"}}, "a secret does not belong in the profile"),
    ({"url": "https://mcp.example.com/mcp", "headers": {"Authorization": "Bearer abc123"}},
     "a secret does not belong in the profile"),
    ({"command": "x", "timeout": 0}, "greater than 0"),
    ({"command": "x", "colour": "blue"}, "Extra inputs are not permitted"),
    ({"command": "x", "approval": "sometimes"}, "'never' or 'always'"),
    ({"command": "x", "approval": "always", "approve_tools": ["send"]}, "every tool asks already"),
    ({"command": "x", "approve_tools": ["send"], "exclude": ["send"]}, "approve_tools names excluded tools: send"),
    ({"command": "x", "sandbox": False, "read_paths": ["/srv/data"]}, "this server has no sandbox"),
    ({"url": "https://mcp.example.com/mcp", "write_paths": ["/srv/data"]}, "this server has no sandbox"),
    ({"command": "x", "read_paths": ["srv/data"]}, "must be absolute paths (got 'srv/data')"),
    ({"url": "https://mcp.example.com/mcp", "network": True}, "network are for a sandboxed stdio server; this "
     "server has no sandbox"),
    ({"command": "x", "sandbox": False, "memory_mb": 512, "processes": 64},
     "memory_mb and processes are for a sandboxed stdio server; this server has no sandbox"),
    ({"command": "x", "memory_mb": 16}, "greater than or equal to 64"),
    ({"command": "x", "processes": 2}, "greater than or equal to 8"),
    ({"command": "x", "network": "sometimes"}, "valid boolean"),
    ({"command": "x", "cwd": "/srv/project"}, "cwd /srv/project is outside what the sandboxed server may see"),
])
def test_a_bad_server_setting_is_one_sentence_naming_it(tmp_path, server, says):
    folder = write_profile(tmp_path / "bot", {"srv": server})
    with pytest.raises(ConfigError) as caught:
        load_profile(str(folder))
    message = str(caught.value)
    assert "mcp_servers.srv" in message and says in message and "\n" not in message


def test_credentials_by_reference_and_plain_settings_are_taken(tmp_path):
    folder = write_profile(tmp_path / "bot", {"srv": {"url": "https://mcp.example.com/mcp",
                                                      "headers": {"Authorization": "Bearer ${SRV_TOKEN}",
                                                                  "Accept": "application/json"}},
                                              "local": {"command": "x", "env": {"LOG_LEVEL": "debug",
                                                                                "API_KEY": "${LOCAL_KEY}"}}})
    assert set(load_profile(str(folder)).mcp_servers) == {"srv", "local"}


def test_a_sandboxed_servers_limits_left_out_are_the_workspaces_and_its_own_are_kept(tmp_path):
    folder = write_profile(tmp_path / "bot", {"plain": {"command": "x"},
                                              "own": {"command": "x", "memory_mb": 256, "processes": 16},
                                              "trusted": {"command": "x", "sandbox": False}},
                           workspace={"memory_mb": 512, "processes": 40})
    servers = load_profile(str(folder)).mcp_servers
    assert (servers["plain"].memory_mb, servers["plain"].processes, servers["plain"].network) == (512, 40, False)
    assert (servers["own"].memory_mb, servers["own"].processes) == (256, 16)
    assert (servers["trusted"].memory_mb, servers["trusted"].processes) == (None, None)


def test_a_server_name_that_cannot_prefix_tool_names_is_refused(tmp_path):
    folder = write_profile(tmp_path / "bot", {"my server!": {"command": "x"}})
    with pytest.raises(ConfigError, match="must be 1-32 letters, digits, _ or -"):
        load_profile(str(folder))


async def test_a_reference_to_an_unset_variable_stops_the_start_with_one_sentence(tmp_path):
    folder = write_profile(tmp_path / "bot", {"srv": {"url": "http://127.0.0.1:9/mcp",
                                                       "headers": {"Authorization": "Bearer ${MCP_TEST_UNSET}"}}})
    code, _, err = await invoke_beside("chat", "--bot", str(folder), stdin="hi\n",
                                       env={"OPENAI_API_KEY": "k", "HERMES_HOME": str(tmp_path)})
    assert code == 2
    assert_one_sentence(err, "MCP_TEST_UNSET is not set", "MCP server srv")


async def test_mcp_list_starts_the_servers_and_prints_their_tools(tmp_path):
    folder = write_profile(tmp_path / "bot", {
        "fake": {"command": sys.executable, "args": [FAKE_SERVER, "stdio"], "include": ["echo", "big"]},
        "time": {"command": "mcp-server-time"},
        "broken": {"command": sys.executable, "args": [FAKE_SERVER, "stdio"], "env": {"FAKE_MCP_FAIL": "1"}}})
    code, out, _ = await cli("mcp", "list", "--bot", str(folder), env={})  # a process: its servers' own
    assert code == 1  # one server did not start
    lines = out.splitlines()
    assert "fake__echo  [mcp:fake]  Say the text back, with the server's label." in lines
    assert any(line.startswith("time__get_current_time  [mcp:time]") for line in lines)
    assert not any(line.startswith("fake__hang") for line in lines)
    assert any(line.startswith("not running: MCP server broken is not running") for line in lines)
