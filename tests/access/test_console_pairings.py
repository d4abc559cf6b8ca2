"""The operator's console lists the strangers waiting with a pairing code and approves one:
through its JSON API, and on its Strangers page in headless Chromium."""

from __future__ import annotations

from pathlib import Path

import httpx
from playwright.async_api import Browser

from channels.web.app import create_app
from tests.access.test_pairing import code_in, stranger
from tests.admin.seed import BEARER, Seeded, admin_runtime
from tests.admin.test_console_browser import Console, browser, logged_in  # noqa: F401
from tests.support.live_server import LiveServer
from tests.support.peers import needs_chromium
from tests.support.runtime import inbound


async def test_the_console_lists_waiting_codes_and_approves_one(tmp_path: Path) -> None:
    runtime = admin_runtime(tmp_path, channels_telegram_access_admins=["777"])
    try:
        code = code_in((await runtime.engine.respond(stranger("hi"))).text)
        transport = httpx.ASGITransport(app=create_app(runtime))
        async with httpx.AsyncClient(transport=transport, base_url="http://console.test") as client:
            assert (await client.get("/admin/api/pairings")).status_code in (401, 303, 307)
            [waiting] = (await client.get("/admin/api/pairings", headers=BEARER)).json()
            assert (waiting["code"], waiting["lane"], waiting["user_id"], waiting["name"]) == (
                code,
                "telegram",
                "501",
                "Mallory",
            )
            missing = await client.post("/admin/api/pairings/NOPE42/approve", headers=BEARER)
            assert missing.status_code == 404
            approved = await client.post(f"/admin/api/pairings/{code}/approve", headers=BEARER)
            assert approved.json() == {"lane": "telegram", "user_id": "501", "name": "Mallory"}
            assert (await client.get("/admin/api/pairings", headers=BEARER)).json() == []

        assert (await runtime.engine.respond(stranger("hello again"))).kind == "assistant"
    finally:
        await runtime.aclose()


@needs_chromium
async def test_the_strangers_page_shows_a_waiting_code_and_its_approve_button_lets_them_in(
    browser: Browser,  # noqa: F811
    tmp_path: Path,
) -> None:
    runtime = admin_runtime(tmp_path, channels_telegram_access_admins=["777"])
    try:
        code = code_in((await runtime.engine.respond(stranger("hi"))).text)
        # A conversation of someone let in: the console opens on the list of conversations.
        await runtime.engine.respond(inbound("hello"))
        async with LiveServer(create_app(runtime)) as live:
            page = await logged_in(browser, Console(live.base_url, runtime, Seeded("", ""), ""))
            await page.click("[data-nav=pairings]")
            row = page.locator(f"tr[data-pairing='{code}']")
            await row.wait_for()
            shown = await row.inner_text()
            assert "Mallory" in shown and "501" in shown and "telegram" in shown

            await row.locator("[data-role=approve]").click()
            await page.wait_for_selector("[data-testid=pairings]", state="detached")
            assert "No stranger is waiting" in await page.locator("#page").inner_text()

        assert (await runtime.engine.respond(stranger("hello again"))).kind == "assistant"
    finally:
        await runtime.aclose()
