"""A reminder set on the web reaches the open widget without a reload, and its history."""

from __future__ import annotations

from pathlib import Path

from playwright.async_api import Browser

from channels.web.app import create_app
from tests.support.live_server import LiveServer
from tests.support.peers import needs_chromium
from tests.support.runtime import RuntimeFactory
from tests.web.test_widget_browser import browser, open_demo, send

__all__ = ["browser"]
REMINDER = "[data-event=reminder]"
DEADLINE_MS = 60_000


@needs_chromium
async def test_the_widget_shows_a_reminder_when_it_falls_due_without_a_reload(
    runtimes: RuntimeFactory, browser: Browser, tmp_path: Path
) -> None:
    # The offline demo model calls `schedule` for "remind me in N seconds to X".
    runtime = runtimes(tmp_path)
    async with LiveServer(create_app(runtime)) as live:
        page = await open_demo(browser, live.base_url)
        await send(page, "remind me in 3 seconds to stretch")
        loads = []
        page.on("load", lambda _page: loads.append(1))
        bubble = page.locator(REMINDER)
        await bubble.wait_for(timeout=DEADLINE_MS)
        assert "stretch" in await bubble.inner_text()
        assert loads == []
        # After a reload it is in the history, once, as the persona's message.
        await page.reload()
        await page.wait_for_selector("#chorus-widget[data-ready]", state="attached")
        stored = page.locator("[data-author=assistant]", has_text="⏰ stretch")
        await stored.first.wait_for(timeout=DEADLINE_MS)
        assert await stored.count() == 1
        # The page leaves: its push stream ends, and the server can stop.
        await page.context.close()
