"""The web lane: a FastAPI chat API, a streaming widget and its demo page.

Owns visitor tokens (bearer header or HttpOnly cookie), the HTTP routes, Server-Sent
Events of a turn, upload limits, CORS and per-visitor rate limits. It turns requests
into `InboundMessage`s for the engine and reads visitors and history through
`bot.visitors` and `bot.history`; it never builds context, talks to the model or
touches the database itself.

Importing this package imports no web framework: `build` does, when the lane runs.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from bot.runtime import Runtime
    from channels.web.app import WebRunner


def build(runtime: Runtime) -> WebRunner:
    from channels.web.app import WebRunner

    return WebRunner(runtime)
