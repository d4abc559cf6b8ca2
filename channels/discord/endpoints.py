"""Where the Discord client connects: `channels.discord.api_base` and `gateway_url`.

discord.py builds every REST URL from one class constant and falls back to one default
gateway. A subclassed HTTP client (REST calls and the gateway socket) and webhook adapter
(interaction responses, webhook messages) rewrite those prefixes for this client only, so
a proxy or a local stand-in is configured without touching the library's globals.
"""

from __future__ import annotations

from typing import Any

import aiohttp
import yarl
from discord.gateway import DiscordWebSocket
from discord.http import HTTPClient, Route
from discord.webhook.async_ import AsyncWebhookAdapter, async_context

DISCORD_API_BASE = Route.BASE
DISCORD_GATEWAY = DiscordWebSocket.DEFAULT_GATEWAY


class Endpoints:
    def __init__(self, api_base: str, gateway_url: str) -> None:
        self.api_base = api_base.rstrip("/")
        self.gateway_url = yarl.URL(gateway_url)

    def rest(self, url: str) -> str:
        if url.startswith(DISCORD_API_BASE):
            return self.api_base + url[len(DISCORD_API_BASE) :]
        return url

    def gateway(self, url: str) -> str:
        """Discord's default gateway becomes the configured one; a resume URL from READY stays as given."""
        parsed = yarl.URL(url)
        if parsed.host != DISCORD_GATEWAY.host:
            return url
        return str(self.gateway_url.with_query(parsed.query))


class RoutedHTTPClient(HTTPClient):
    def __init__(self, endpoints: Endpoints, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.endpoints = endpoints

    async def request(self, route: Route, **kwargs: Any) -> Any:
        route.url = self.endpoints.rest(route.url)
        return await super().request(route, **kwargs)

    async def ws_connect(self, url: str, *, compress: int = 0) -> aiohttp.ClientWebSocketResponse:
        return await super().ws_connect(self.endpoints.gateway(url), compress=compress)


class RoutedWebhookAdapter(AsyncWebhookAdapter):
    def __init__(self, endpoints: Endpoints) -> None:
        super().__init__()  # type: ignore[no-untyped-call]
        self.endpoints = endpoints

    async def request(self, route: Route, session: aiohttp.ClientSession, **kwargs: Any) -> Any:
        route.url = self.endpoints.rest(route.url)
        return await super().request(route, session, **kwargs)


def route_webhooks_in_this_task(endpoints: Endpoints) -> None:
    """Webhook calls made by this task and every task it starts go to the configured API.

    discord.py reads its webhook adapter from a context variable, and its event handlers
    run in tasks started by the gateway task, so they inherit this setting.
    """
    async_context.set(RoutedWebhookAdapter(endpoints))
