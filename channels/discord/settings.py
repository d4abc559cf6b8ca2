"""Settings of the Discord lane (`channels.discord`); the lane runs when a token is set."""

from __future__ import annotations

from typing import Literal, Self

from pydantic import Field, SecretStr, model_validator

from bot.lanes import LaneSettings


class DiscordSettings(LaneSettings):
    token: SecretStr | None = None
    # Where the client connects; change them for a proxy (or a local stand-in in tests).
    api_base: str = "https://discord.com/api/v10"
    gateway_url: str = "wss://gateway.discord.gg"
    activation: Literal["mention", "always"] = "mention"
    allowed_guilds: list[str] = Field(default_factory=list)
    allowed_channels: list[str] = Field(default_factory=list)
    allowed_users: list[str] = Field(default_factory=list)
    # Sharding, for bots in many servers (Discord requires it past 2,500): the bot runs
    # `shard_count` gateway shards in all, and this process connects `shard_ids` of them
    # (empty: every shard). Discord sends a server's events to shard (guild_id >> 22) %
    # shard_count and DMs to shard 0. Unset: one connection, no sharding.
    shard_count: int | None = Field(default=None, ge=1)
    shard_ids: list[int] = Field(default_factory=list)

    def is_active(self) -> bool:
        return bool(self.token)

    def allow_listed(self, user_id: str, username: str | None) -> bool:
        return user_id in self.allowed_users

    @model_validator(mode="after")
    def _shards_fit(self) -> Self:
        if self.shard_ids and self.shard_count is None:
            raise ValueError("channels.discord.shard_ids needs channels.discord.shard_count")
        count = self.shard_count or 0
        wrong = [shard for shard in self.shard_ids if not 0 <= shard < count]
        if wrong:
            raise ValueError(
                f"channels.discord.shard_ids {wrong} are not shards of shard_count {count} (0–{count - 1})"
            )
        if len(set(self.shard_ids)) != len(self.shard_ids):
            raise ValueError("channels.discord.shard_ids lists a shard twice")
        return self
