"""The widget script and the demo page that embeds it."""

from __future__ import annotations

import html
from pathlib import Path

from fastapi import APIRouter, Request
from fastapi.responses import HTMLResponse, Response

from channels.web.bundles import widget_script as widget_bundle

STATIC = Path(__file__).parent / "static"
DEMO_PAGE = (STATIC / "index.html").read_text(encoding="utf-8")
# Where the demo page's embed tag names the widget script.
WIDGET_URL_MARK = "{widget_url}"
DEMO_PAGE_POLICY = (
    "default-src 'self'; img-src 'self' blob: data:; media-src 'self' blob:; "
    "style-src 'self' 'unsafe-inline'; object-src 'none'; base-uri 'none'; frame-ancestors 'self'"
)

router = APIRouter(include_in_schema=False)


@router.get("/")
async def demo_page(request: Request) -> HTMLResponse:
    # The tag to copy names the address this page came from: the configured host and port,
    # or a proxy's, as the request reached the server.
    widget_url = html.escape(str(request.url_for("widget_script")))
    return HTMLResponse(
        DEMO_PAGE.replace(WIDGET_URL_MARK, widget_url),
        headers={"Content-Security-Policy": DEMO_PAGE_POLICY, "Cache-Control": "no-cache"},
    )


@router.get("/widget.js")
async def widget_script(request: Request) -> Response:
    # One script for embedders: the widget with the libraries that render its replies.
    return widget_bundle().response(request)
