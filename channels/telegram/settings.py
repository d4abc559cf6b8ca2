"""Settings of the Telegram lane (`channels.telegram`); the lane runs when a token is set."""

from __future__ import annotations

from typing import Literal

from pydantic import Field, SecretStr

from bot.lanes import LaneSettings


class TelegramSettings(LaneSettings):
    token: SecretStr | None = None
    mode: Literal["polling", "webhook"] = "polling"
    api_base: str | None = None
    webhook_secret: SecretStr | None = None
    webhook_url: str | None = None
    activation: Literal["mention", "always"] = "mention"
    allowed_users: list[str] = Field(default_factory=list)
    allowed_chats: list[str] = Field(default_factory=list)

    def is_active(self) -> bool:
        return bool(self.token)

    def allow_listed(self, user_id: str, username: str | None) -> bool:
        listed = {entry.strip().lstrip("@").lower() for entry in self.allowed_users}
        return bool({user_id, (username or "").lower()} & listed)
