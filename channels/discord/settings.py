"""Settings of the Discord lane (`channels.discord`); the lane runs when a token is set."""

from __future__ import annotations

from typing import Literal

from pydantic import Field, SecretStr

from channels.registry import LaneSettings


class DiscordSettings(LaneSettings):
    token: SecretStr | None = None
    # Where the client connects; change them for a proxy (or a local stand-in in tests).
    api_base: str = "https://discord.com/api/v10"
    gateway_url: str = "wss://gateway.discord.gg"
    activation: Literal["mention", "always"] = "mention"
    allowed_guilds: list[str] = Field(default_factory=list)
    allowed_channels: list[str] = Field(default_factory=list)
    allowed_users: list[str] = Field(default_factory=list)

    def is_active(self) -> bool:
        return bool(self.token)
