"""The built-in lanes, registered with the runtime (`bot.lanes`) when `channels` is imported.

A lane is a package under `channels/` with a pydantic settings model in
`<lane>/settings.py` (a `bot.lanes.LaneSettings`, no platform import) and a
`build(runtime)` in its `__init__.py` that returns a `bot.lanes.LaneRunner`. Adding one
is one more `LaneSpec` here (docs/lanes/adding-a-lane.md).
"""

from __future__ import annotations

from bot.lanes import LaneSpec, register_all

register_all(
    [
        LaneSpec(
            "web",
            "channels.web.settings:WebSettings",
            "channels.web",
            env_aliases={"CHORUS_ADMIN_TOKEN": "admin_token"},
        ),
        LaneSpec(
            "telegram",
            "channels.telegram.settings:TelegramSettings",
            "channels.telegram",
            check_path="channels.telegram.doctor:check",
            env_aliases={
                "CHORUS_TELEGRAM_TOKEN": "token",
                "CHORUS_TELEGRAM_WEBHOOK_SECRET": "webhook_secret",
            },
        ),
        LaneSpec(
            "discord",
            "channels.discord.settings:DiscordSettings",
            "channels.discord",
            check_path="channels.discord.doctor:check",
            env_aliases={"CHORUS_DISCORD_TOKEN": "token"},
        ),
    ]
)
