"""The web lane: a FastAPI chat API, a streaming widget and its demo page.

Owns visitor tokens (bearer header or HttpOnly cookie), the HTTP routes, Server-Sent
Events of a turn, upload limits, CORS and per-visitor rate limits. It turns requests
into `InboundMessage`s for the engine and reads history through `Store`; it never
builds context, talks to the model or writes to the database itself.
"""

from channels.web.app import create_app
from channels.web.server import LiveServer

__all__ = ["LiveServer", "create_app"]
