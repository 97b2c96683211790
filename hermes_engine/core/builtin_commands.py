"""Commands every bot has: /new (/reset), /stop, /help (/start), /status, /model."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import replace

from hermes_engine.agent.tool_record import summary as tool_summary
from hermes_engine.core.tool_lists import started_without
from hermes_engine.policy.limits import SERVICE as USAGE_LIMITS
from hermes_engine.ports.commands import CommandContext, CommandRegistry
from hermes_engine.ports.feature import Feature
from hermes_engine.ports.host import Host
from hermes_engine.providers.registry import parse_model_spec


def register_builtin_commands(registry: CommandRegistry, gateway: Host, features: Sequence[Feature]) -> None:
    """The built-ins belong to the gateway: unlike a feature's commands they reach every feature's hooks."""

    @registry.command("new", "start a fresh conversation (memory and skills stay)", aliases=("reset",))
    async def new(ctx: CommandContext) -> str:
        await gateway.interrupt(ctx.session)
        await gateway.new_session(ctx.session)
        return "Started a new conversation."

    @registry.command("stop", "stop the answer in progress", immediate=True)
    async def stop(ctx: CommandContext) -> str:
        stopped = await gateway.interrupt(ctx.session)
        for feature in features:
            await feature.on_stop(ctx.session.scope)
        return "Stopped." if stopped else "Nothing is running."

    @registry.command("help", "what I can do and the commands", aliases=("start",))
    async def help_(ctx: CommandContext) -> str:
        intro = gateway.profile.description or "I am an assistant that remembers you and learns with use."
        return f"{intro}\n\nCommands:\n{registry.help_text()}"

    @registry.command("status", "model, session, token use and what it cost")
    async def status(ctx: CommandContext) -> str:
        session = ctx.session
        await gateway.ensure_loaded(session, ctx.person_id)
        models = session.record.model or gateway.profile.models(gateway.settings)[0]
        usage = session.usage
        lines = [
            f"Bot: {gateway.bot}",
            f"Model: {models}" + (f" (last answer from {session.last_model})"
                                  if session.last_model and session.last_model != models else ""),
            f"Session: #{session.record.id}, {len(session.history)} messages",
            f"Tokens: {usage.input_tokens} in, {usage.output_tokens} out, "
            f"{usage.cache_read_tokens} cache read, {usage.cache_write_tokens} cache write",
            tool_summary(await gateway.store.load_messages(session.record.id)),
        ]
        without = started_without(session)
        if without:
            lines.append(f"Tools: this conversation started without the tools of {', '.join(without)}; /new "
                         "starts one with them once they are up.")
        spending = gateway.services.get(USAGE_LIMITS)
        if spending is not None:
            lines.extend(await spending.cost_lines(ctx.person_id, admin=ctx.is_admin))
        for feature in features:
            lines.extend(await feature.status_lines(session.scope, ctx.person_id))
        return "\n".join(lines)

    @registry.command("model", "show or switch the model for this conversation: /model provider:model")
    async def model(ctx: CommandContext) -> str:
        session = ctx.session
        if not ctx.args:
            current = session.record.model or gateway.profile.models(gateway.settings)[0]
            return f"Model: {current}. Switch with /model provider:model (e.g. openai:gpt-4.1-mini)."
        spec = ctx.args.split()[0]
        parse_model_spec(spec)  # raises ConfigError with a clear sentence
        await gateway.store.update_session(session.record.id, model=spec)
        session.record = replace(session.record, model=spec)
        return f"This conversation now uses {spec}."

    @registry.command("tools", "list the tools the agent has here, grouped by where they come from")
    async def tools(ctx: CommandContext) -> str:
        groups: dict[str, list[str]] = {}
        for t in gateway.tools:
            groups.setdefault(t.toolset, []).append(t.name)
        if not groups:
            return "No tools."
        return "\n".join(f"{source}: {', '.join(sorted(names))}" for source, names in sorted(groups.items()))
