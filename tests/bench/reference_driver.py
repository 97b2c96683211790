"""Runs the reference agent (Nous Research's Hermes Agent, installed from PyPI in a venv of its own) as one
persistent chat session on piped lines, for `reference_bench.py`: started with the reference's Python, it
imports nothing of this project.

Its own command line answers one query per process (`hermes chat -Q -q ...`) or runs a full-screen terminal
chat; neither is a chat session on a pipe. This keeps one of its CLI sessions (the object `hermes chat`
builds, with its configuration from `HERMES_HOME`) and sends each line through the same quiet path `-Q`
takes, the session's history carried from turn to turn as its chat does. It prints `ready` once the session
is set up (the agent itself is built by the first turn, which the bench counts as warm-up), then one line per
answer. Whatever the reference prints itself goes to stderr, so stdout carries
only those lines.

    HERMES_HOME=/tmp/refhome /tmp/refvenv/bin/python tests/bench/reference_driver.py
"""

from __future__ import annotations

import os
import sys


def main() -> int:
    answers = os.fdopen(os.dup(1), "w", buffering=1)
    os.dup2(2, 1)
    sys.stdout = sys.stderr
    os.environ["HERMES_INTERACTIVE"] = "1"  # as `hermes chat` says of itself (its cronjob tool is offered then)
    from cli import CLI_CONFIG, HermesCLI  # the reference's own modules, from its venv
    from hermes_cli.tools_config import _get_platform_tools

    session = HermesCLI(toolsets=sorted(_get_platform_tools(CLI_CONFIG, "cli")))  # the toolsets `hermes chat` takes
    session.tool_progress_mode = "off"
    if not session._claim_active_session("cli", stderr=True) or not session._ensure_runtime_credentials():
        return 1
    answers.write("ready\n")
    for line in sys.stdin:
        text = line.rstrip("\n")
        route = session._resolve_turn_agent_config(text)
        if route["signature"] != session._active_agent_route_signature:
            session.agent = None
        if not session._init_agent(model_override=route["model"], runtime_override=route["runtime"],
                                   request_overrides=route.get("request_overrides")):
            return 1
        agent = session.agent
        agent.quiet_mode = True
        agent.suppress_status_output = True
        agent.stream_delta_callback = None
        agent.tool_gen_callback = None
        result = agent.run_conversation(user_message=text, conversation_history=session.conversation_history)
        session.conversation_history = result.get("messages", session.conversation_history)
        if getattr(agent, "session_id", None):
            session.session_id = agent.session_id
        answer = str(result.get("final_response") or result.get("error") or "")
        answers.write(answer.replace("\n", " ") + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
