"""The console in headless Chromium against a real uvicorn server on 127.0.0.1.

The screenshots the docs show are taken by scripts/screenshots.py.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from dataclasses import dataclass
from pathlib import Path

import pytest_asyncio
from playwright.async_api import Browser, Page, async_playwright, expect

from bot.runtime import Runtime
from channels.web.app import create_app
from tests.admin.seed import ADMIN_TOKEN, DOCUMENT_TEXT, Seeded, admin_runtime, seed
from tests.support.live_server import LiveServer
from tests.support.peers import needs_chromium
from tests.support.runtime import inbound
from tests.web.test_widget_browser import CHROMIUM, CHROMIUM_ARGS

DEADLINE_MS = 60_000
DISCORD_FAILURE = (
    "Discord closed the gateway with 4014 (disallowed intents): enable the Message Content Intent."
)

pytestmark = needs_chromium


@dataclass
class Console:
    base_url: str
    runtime: Runtime
    seeded: Seeded
    long_id: str


@pytest_asyncio.fixture
async def browser() -> AsyncIterator[Browser]:
    async with async_playwright() as playwright:
        launched = await playwright.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS)
        yield launched
        await launched.close()


@pytest_asyncio.fixture
async def console(tmp_path: Path) -> AsyncIterator[Console]:
    # A small window, so the long conversation's chart shows context management at work.
    runtime = admin_runtime(
        tmp_path,
        model_context_window="4000",
        context_collapse_share="0.6",
        context_compact_share="0.8",
        channels_discord_token="not-a-real-token",
    )
    # The Discord lane is configured but not started here; it reports what a refused gateway reports.
    runtime.lanes.failed("discord", DISCORD_FAILURE)
    seeded = await seed(runtime)
    long_id = ""
    for number in range(18):
        words = " ".join(f"detail{number}-{index}" for index in range(30 + 4 * (number % 5)))
        reply = await runtime.engine.respond(
            inbound(f"Planning note {number}: {words}", lane="discord", user_id="dana", display_name="Dana")
        )
        long_id = reply.session_id or ""
        await runtime.engine.drain()
    async with LiveServer(create_app(runtime)) as live:
        yield Console(live.base_url, runtime, seeded, long_id)
    await runtime.aclose()


async def logged_in(browser: Browser, console: Console) -> Page:
    context = await browser.new_context(viewport={"width": 1200, "height": 820})
    page = await context.new_page()
    page.set_default_timeout(DEADLINE_MS)
    await page.goto(console.base_url + "/admin")
    assert page.url.endswith("/admin/login")
    await page.fill("#token", ADMIN_TOKEN)
    await page.click("button[type=submit]")
    await page.wait_for_selector("[data-testid=conversations]")
    return page


async def rendered(page: Page) -> None:
    """Waits until the page has rendered."""
    await page.wait_for_selector("#page[data-page]:not([data-loading])")


async def test_login_refuses_a_wrong_token_then_lets_the_right_one_in(
    browser: Browser, console: Console
) -> None:
    page = await (await browser.new_context()).new_page()
    page.set_default_timeout(DEADLINE_MS)
    await page.goto(console.base_url + "/admin/login")
    await page.fill("#token", "not-it")
    await page.click("button[type=submit]")
    assert "not the admin token" in await page.inner_text(".error")
    await page.fill("#token", ADMIN_TOKEN)
    await page.click("button[type=submit]")
    await page.wait_for_selector("[data-testid=conversations]")
    # The login cookie is out of reach of scripts.
    assert "chorus_admin" not in await page.evaluate("document.cookie")
    await page.click("#logout")
    await page.wait_for_url("**/admin/login")


async def test_conversation_list_and_search(browser: Browser, console: Console) -> None:
    page = await logged_in(browser, console)
    rows = page.locator("[data-testid=conversations] tbody tr")
    assert await rows.count() == 3
    first = await rows.first.inner_text()
    assert "Dana (discord)" in first  # the latest activity comes first
    group = page.locator(f"tr[data-session='{console.seeded.group_id}']")
    assert await group.locator(".lane.telegram").count() == 1
    assert "telegram -100777" in await group.inner_text()
    await rendered(page)
    await page.fill("input[type=search]", "passport")
    await page.press("input[type=search]", "Enter")
    await page.wait_for_selector("text=No conversations match.")
    await page.fill("input[type=search]", "alice")
    await page.press("input[type=search]", "Enter")
    await expect(rows).to_have_count(1, timeout=DEADLINE_MS)
    assert console.seeded.private_id in await rows.first.inner_text()


async def test_transcript_with_persona_switch_image_and_document(browser: Browser, console: Console) -> None:
    page = await logged_in(browser, console)
    await page.click(f"tr[data-session='{console.seeded.private_id}']")
    await page.wait_for_selector("[data-testid=transcript]")
    assert await page.locator("[data-persona=ada]").count() == 3
    assert await page.locator("[data-persona=sage]").count() == 1
    assert await page.locator(".event", has_text="persona switched from ada to sage").count() == 1
    # Each event is shown as what its kind says it is.
    command = page.locator(".event[data-event=command]", has_text="/persona sage")
    assert (await command.inner_text()).endswith(" · Alice: command: /persona sage")
    assert await page.locator("[data-record=snip]").count() == 1
    image = page.locator(".files img[alt='cat.png']")
    await image.wait_for()
    # Loaded, not broken: the image has real pixels (checked without eval, which the page's CSP forbids).
    await expect(image).to_have_js_property("complete", True, timeout=DEADLINE_MS)
    assert await image.evaluate("img => img.naturalWidth") == 64
    document = page.locator("[data-document='checklist.txt']")
    await document.get_by_role("button", name="Show text").click()
    await page.wait_for_selector(".doc-text")
    assert await page.inner_text(".doc-text") == DOCUMENT_TEXT
    await rendered(page)
    # Switching the persona from the console stores the same event as /persona.
    await page.select_option("select[name=persona]", "captain")
    await page.click("button:has-text('Switch')")
    await page.wait_for_selector(".event:has-text('persona switched from sage to captain')")
    session = console.runtime.stores.sessions.get_session(console.seeded.private_id)
    assert session is not None and session.persona_id == "captain"


async def test_context_chart_renders_tokens_per_turn_with_marks(browser: Browser, console: Console) -> None:
    page = await logged_in(browser, console)
    await page.goto(f"{console.base_url}/admin#/context/{console.long_id}")
    chart = page.locator("[data-testid=turn-chart]")
    await chart.wait_for()
    turns = await page.locator("[data-testid=turn-chart] circle").count()
    assert turns == 18
    points = await page.get_attribute("[data-testid=turn-line]", "points")
    assert points is not None and len(points.split()) == 18
    assert await page.locator("[data-testid=turn-chart] [data-mark]").count() >= 1
    box = await chart.bounding_box()
    assert box is not None and box["width"] > 400 and box["height"] > 100
    bar_parts = page.locator("[data-testid=context-bar] rect[data-part]")
    assert await bar_parts.count() >= 2
    assert await page.locator("[data-testid=context-bar] rect[data-part='history']").count() == 1
    # The offline model reports no usage: what it reused is unknown, and no evaluated line is drawn.
    assert (
        await page.inner_text("[data-testid=last-turn]") == "Last turn: reused: unknown (no usage reported)."
    )
    assert await page.locator("[data-testid=evaluated-line]").count() == 0
    assert (await page.inner_text("[data-testid=prompt-prefix]")).startswith("Prompt prefix: ")
    await rendered(page)


async def test_forgetting_a_memory_item(browser: Browser, console: Console) -> None:
    page = await logged_in(browser, console)
    await page.click("[data-nav=memory]")
    await page.wait_for_selector("[data-testid=memory]")
    row = page.locator("tr[data-item]", has_text="PostgreSQL")
    item_id = await row.get_attribute("data-item")
    await rendered(page)
    page.once("dialog", lambda dialog: dialog.accept())
    await row.get_by_role("button", name="Forget").click()
    await page.wait_for_selector(f"tr[data-item='{item_id}']", state="detached")
    await page.goto(f"{console.base_url}/admin#/conversation/{console.seeded.private_id}")
    await page.wait_for_selector(f".event:has-text('memory item #{item_id}')")


async def test_personas_and_health_pages(browser: Browser, console: Console) -> None:
    page = await logged_in(browser, console)
    await page.click("[data-nav=personas]")
    await page.wait_for_selector("[data-testid=personas]")
    assert "Sage" in await page.inner_text("tr[data-persona=sage]")
    await rendered(page)
    await page.click("[data-nav=health]")
    await page.wait_for_selector("[data-testid=lanes]")
    assert "running" in await page.inner_text("tr[data-lane=web]")
    discord = await page.inner_text("tr[data-lane=discord]")
    assert "failed" in discord and "4014" in discord
    assert await page.inner_text("[data-testid=queue-depth]") == "0"
    await rendered(page)


async def test_a_conversations_page_lists_its_upcoming_reminders(browser: Browser, console: Console) -> None:
    set_one = await console.runtime.engine.respond(inbound("/remind every day 08:00 standup", user_id="rita"))
    page = await logged_in(browser, console)
    await page.goto(f"{console.base_url}/admin#/conversation/{set_one.session_id}")
    listed = page.get_by_test_id("reminders")
    await listed.get_by_text("standup").wait_for()
    assert "every 0 8 * * *" in await listed.inner_text()
    # A conversation without any says so.
    await page.goto(f"{console.base_url}/admin#/conversation/{console.seeded.private_id}")
    await page.get_by_test_id("reminders").get_by_text("No upcoming reminders.").wait_for()
