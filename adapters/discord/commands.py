"""The engine's main commands as Discord slash commands.

Discord gives an interaction 3 seconds for a first answer, while the engine may take longer (a /goal
starts a turn), so every command is deferred at once ("thinking…") and the engine's reply becomes the
deferred response, then follow-ups; after the token's 15 minutes it goes to the channel instead (see
`adapters.discord.outbound`). A refusal is answered at once and privately, because nothing follows it.
Only a few commands are registered: the slash menu is global and slow to change, while every engine
command also works as text.
"""

from __future__ import annotations

import contextlib
import logging
from typing import TYPE_CHECKING, Any

import discord
from discord import app_commands

from adapters.discord.inbound import holds_role, place
from hermes_engine.ports.inbound import InboundMessage

if TYPE_CHECKING:
    from adapters.discord.host import DiscordHost as DiscordAdapter

log = logging.getLogger(__name__)

SLASH_COMMANDS = ("goal", "kanban", "new", "stop", "status", "help")
TEXT_OPTIONS = {  # commands taking words after them, as one text option
    "goal": "what to achieve, or: status | pause | resume | clear",
    "kanban": "empty for the board, or: add <title> | show <#id> | move <#id> <status> | block | cancel",
}
DEFAULT_SUMMARIES = {
    "goal": "work on a goal across turns",
    "kanban": "the task board",
    "new": "start a fresh conversation",
    "stop": "stop the answer in progress",
    "status": "model, session and token use",
    "help": "what I can do and the commands",
}
DESCRIPTION_LIMIT = 100  # Discord's limit for a command's description
NOT_IN_THIS_SERVER = "This bot is not enabled in this server."
NO_ACCESS_YET = "You do not have access to this bot yet."
DID_NOT_WORK = "⚠️ That did not work. Please try again."


class SlashCommands:
    def __init__(self, adapter: DiscordAdapter) -> None:
        self.adapter = adapter

    async def setup(self, tree: app_commands.CommandTree[Any]) -> None:
        """Register the commands the engine knows; sync them when configured (a bulk overwrite, so
        commands of an earlier version disappear)."""
        engine = self.adapter.engine
        summaries = {info.name: info.summary for info in engine.command_menu()}
        for name in SLASH_COMMANDS:
            if not engine.knows_command(name):
                continue
            description = (summaries.get(name) or DEFAULT_SUMMARIES[name])[:DESCRIPTION_LIMIT]
            tree.add_command(self._command(name, description))
        if not self.adapter.options.sync_commands:
            return
        try:
            synced = await tree.sync()
            log.info("Discord slash commands synced: %s", ", ".join("/" + c.name for c in synced))
        except discord.HTTPException as exc:
            log.warning("Discord slash commands could not be synced (%s); text commands still work", exc)

    def _command(self, name: str, description: str) -> app_commands.Command[Any, Any, None]:
        if name in TEXT_OPTIONS:
            @app_commands.describe(text=TEXT_OPTIONS[name][:DESCRIPTION_LIMIT])
            async def with_text(interaction: discord.Interaction, text: str | None = None) -> None:
                await self.on_slash(interaction, name, text or "")

            return app_commands.Command(name=name, description=description, callback=with_text)

        async def simple(interaction: discord.Interaction) -> None:
            await self.on_slash(interaction, name, "")

        return app_commands.Command(name=name, description=description, callback=simple)

    async def on_slash(self, interaction: discord.Interaction, name: str, args: str) -> None:
        adapter = self.adapter
        if not adapter.receiving:
            return
        refusal = await self._refusal(interaction)
        if refusal:
            await interaction.response.send_message(refusal, ephemeral=True)
            return
        await interaction.response.defer(thinking=True)  # first thing: Discord wants an answer within 3 s
        user = interaction.user
        kind, chat_id, thread_id = place(interaction.channel, interaction.channel_id, interaction.guild_id)
        message_id = str(interaction.id)
        adapter.outbound.remember_interaction(message_id, interaction)
        msg = InboundMessage(
            platform=adapter.platform, account=adapter.account, chat_kind=kind, chat_id=chat_id,
            thread_id=thread_id, user_id=str(user.id), user_name=user.display_name,
            text=f"/{name} {args}".strip(), message_id=message_id, mentioned=True,
            platform_admin=holds_role(user, adapter.options.admin_role),
            place_listed=adapter.options.guild_allowed(interaction.guild_id),
            raw={"interaction_id": message_id, "guild_id": interaction.guild_id,
                 "channel_id": interaction.channel_id})
        try:
            await adapter.engine.handle(msg)
        except Exception:
            log.exception("Discord command /%s could not be handed to the engine", name)
            with contextlib.suppress(Exception):  # do not leave the person looking at "thinking…"
                await interaction.edit_original_response(content=DID_NOT_WORK)

    async def _refusal(self, interaction: discord.Interaction) -> str | None:
        """Why this interaction is refused (the engine's words when it has some), or None."""
        guild_id = interaction.guild_id
        if guild_id is not None and not self.adapter.serves(guild_id, getattr(interaction.guild, "name", "")):
            return NOT_IN_THIS_SERVER
        decision = await self.adapter.admit(interaction.user, interaction.channel_id, direct=guild_id is None)
        if decision.allowed:
            return None
        return decision.reply or NO_ACCESS_YET
