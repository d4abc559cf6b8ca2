"""Settings of the web lane (`channels.web`); the one HTTP server binds to `host`:`port`."""

from __future__ import annotations

from pydantic import Field, SecretStr

from bot.lanes import LaneSettings


class WebSettings(LaneSettings):
    # Visitors of the widget are the public: open chat with public-audience tools.
    pairs_strangers = False

    enabled: bool = True
    host: str = "127.0.0.1"
    port: int = 8080
    cors_origins: list[str] = Field(default_factory=list)
    rate_limit_per_minute: int = 30
    # The client IP comes from X-Forwarded-For only when the connecting peer is one
    # of these addresses or networks (a reverse proxy); otherwise it is the peer.
    trusted_proxies: list[str] = Field(default_factory=list)
    # Per client IP: new visitors and messages a minute, and replies streaming at once (per process).
    visitors_per_ip_per_minute: int = 10
    messages_per_ip_per_minute: int = 120
    streams_per_ip: int = 4
    # Requests parsed, authenticated and stored at once (per process); the rest wait their turn.
    requests_setting_up: int = Field(default=8, ge=1)
    # A widget's push stream (reminders) ends after this long; the widget reconnects at
    # once and misses nothing, and proxies never see a connection older than this.
    push_stream_seconds: float = Field(default=300.0, gt=0)
    # Visitors that never sent a message are forgotten this long after they were created.
    idle_visitor_hours: float = 24.0
    # The operator's console (/admin) and /metrics are served only when this is set.
    admin_token: SecretStr | None = None
    # Lets Prometheus scrape /metrics without the admin token (the console still needs it).
    metrics_public: bool = False

    def is_active(self) -> bool:
        return self.enabled
