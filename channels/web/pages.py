"""The widget script and the demo page that embeds it."""

from __future__ import annotations

from pathlib import Path

from fastapi import APIRouter
from fastapi.responses import FileResponse

STATIC = Path(__file__).parent / "static"
DEMO_PAGE_POLICY = (
    "default-src 'self'; img-src 'self' blob: data:; media-src 'self' blob:; "
    "style-src 'self' 'unsafe-inline'; object-src 'none'; base-uri 'none'; frame-ancestors 'self'"
)

router = APIRouter(include_in_schema=False)


@router.get("/")
async def demo_page() -> FileResponse:
    return FileResponse(
        STATIC / "index.html",
        media_type="text/html; charset=utf-8",
        headers={"Content-Security-Policy": DEMO_PAGE_POLICY, "Cache-Control": "no-cache"},
    )


@router.get("/widget.js")
async def widget_script() -> FileResponse:
    # no-cache: embedding pages pick up a new widget on the next load.
    return FileResponse(
        STATIC / "widget.js",
        media_type="text/javascript; charset=utf-8",
        headers={"Cache-Control": "no-cache", "X-Content-Type-Options": "nosniff"},
    )
