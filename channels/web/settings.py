"""Settings of the web lane (`channels.web`); the one HTTP server binds to `host`:`port`."""

from __future__ import annotations

from pydantic import Field

from channels.registry import LaneSettings


class WebSettings(LaneSettings):
    enabled: bool = True
    host: str = "127.0.0.1"
    port: int = 8080
    cors_origins: list[str] = Field(default_factory=list)
    rate_limit_per_minute: int = 30
    public_url: str | None = None

    def is_active(self) -> bool:
        return self.enabled
