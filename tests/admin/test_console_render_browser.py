"""What the console draws, in headless Chromium: replies as Markdown, hostile ones inert, tool calls
as formatted JSON, command answers with their lines, no emoji, and every page usable at 390 px."""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path

import pytest_asyncio
from playwright.async_api import Browser, Page

from bot.providers.openai import OpenAICompatibleProvider
from channels.web.app import create_app
from tests.admin.seed import ADMIN_TOKEN, Seeded, admin_runtime
from tests.admin.test_console_browser import DEADLINE_MS, Console, browser  # noqa: F401
from tests.fakes.openai_server import FakeOpenAI, ToolCalls
from tests.support.live_server import LiveServer
from tests.support.peers import needs_chromium
from tests.support.runtime import inbound
from tests.web.replies import FRUITS, HOSTILE
from tests.web.test_widget_markdown_browser import ACTIVE, _pictograph

pytestmark = needs_chromium
PHONE = {"width": 390, "height": 844}


@pytest_asyncio.fixture
async def console(tmp_path: Path, fake_openai: FakeOpenAI) -> AsyncIterator[Console]:
    runtime = admin_runtime(tmp_path, OpenAICompatibleProvider(fake_openai.base_url))
    # Each turn with the model's answers scripted just before it: memory's after-turn work, drained
    # between turns, gets the stand-in's usual answers instead.
    turns: list[tuple[str, list[ToolCalls | str]]] = [
        ("tell me about fruits", [FRUITS]),
        ("and something odd", [HOSTILE]),
        ("what did I say about my cat?", [ToolCalls([("recall", {"query": "my cat", "k": 3})]), "Found it."]),
        ("/help", []),
        ("/context", []),
    ]
    session_id = ""
    for text, answers in turns:
        fake_openai.script(*answers)
        reply = await runtime.engine.respond(inbound(text, user_id="alice", display_name="Alice"))
        session_id = reply.session_id or session_id
        await runtime.engine.drain()
    async with LiveServer(create_app(runtime)) as live:
        yield Console(live.base_url, runtime, Seeded(session_id, ""), "")
    await runtime.aclose()


async def logged_in(
    browser: Browser,  # noqa: F811
    console: Console,
    **context_options: object,
) -> Page:
    # Without the page's Content-Security-Policy, so that only the console's own care keeps a
    # hostile reply inert (and the test may read the page with scripts).
    context = await browser.new_context(bypass_csp=True, **context_options)  # type: ignore[arg-type]
    page = await context.new_page()
    page.set_default_timeout(DEADLINE_MS)
    await page.goto(console.base_url + "/admin/login")
    await page.fill("#token", ADMIN_TOKEN)
    await page.click("button[type=submit]")
    await page.wait_for_selector("[data-testid=conversations]")
    return page


async def open_transcript(page: Page, console: Console) -> None:
    await page.goto(f"{console.base_url}/admin#/conversation/{console.seeded.private_id}")
    await page.wait_for_selector("[data-testid=transcript]")


async def test_replies_are_rendered_markdown_and_hostile_ones_stay_inert(
    browser: Browser,  # noqa: F811
    console: Console,
) -> None:
    page = await logged_in(browser, console)
    await open_transcript(page, console)
    replies = page.locator(".msg.assistant .md")
    fruits = replies.nth(0)
    assert await fruits.locator("h2").inner_text() == "Fruits"
    assert await fruits.locator("ol > li").count() == 3
    assert await fruits.locator("table th").count() == 3
    assert await fruits.locator(".code-block code .hljs-keyword").count() >= 2
    assert await fruits.locator("a").get_attribute("rel") == "noopener noreferrer"
    # What the person wrote stays as they wrote it.
    assert await page.locator(".msg.user .text").first.inner_text() == "tell me about fruits"

    hostile = replies.nth(1)
    assert await hostile.locator(ACTIVE).count() == 0
    shown = await hostile.inner_text()
    assert "<script>window.__xss = 1</script>" in shown and "<b>bold?</b>" in shown
    hrefs = await hostile.locator("a[href]").evaluate_all("links => links.map(a => a.getAttribute('href'))")
    assert hrefs == ["https://tracker.invalid/p.png?secret=1", "https://example.org/safe"]
    for index in range(await hostile.locator("a:not([href])").count()):
        await hostile.locator("a:not([href])").nth(index).click()
    assert await page.evaluate("window.__xss") is None


async def test_tool_calls_show_formatted_json_and_command_answers_keep_their_lines(
    browser: Browser,  # noqa: F811
    console: Console,
) -> None:
    page = await logged_in(browser, console)
    await open_transcript(page, console)
    call = page.locator(".call")
    name = call.locator(".call-name")
    assert await name.inner_text() == "recall"
    assert await name.locator("svg").get_attribute("aria-label") == "Tool call"
    arguments = call.locator("pre.arguments")
    assert await arguments.inner_text() == '{\n  "query": "my cat",\n  "k": 3\n}'
    assert await arguments.locator(".hljs-attr").count() == 2
    result = page.locator("[data-role=tool] pre.result")
    assert (await result.inner_text()).startswith("{\n  ")

    help_answer = page.locator(".event[data-event=command_reply]", has_text="/start")
    lines = (await help_answer.inner_text()).splitlines()
    assert len(lines) > 10 and any(line.startswith("/start") for line in lines)
    context = page.locator(".event[data-event=command_reply]", has_text="system prompt")
    assert "monospace" in await context.evaluate("node => getComputedStyle(node).fontFamily")
    # Its columns line up: the token counts of the parts end at one x.
    ends = await context.evaluate(
        """node => ['system prompt', 'history', 'tool schemas'].map(part => {
          const text = node.firstChild;
          const start = text.data.indexOf('  ' + part);
          const end = text.data.indexOf('\\n', start);
          const range = document.createRange();
          range.setStart(text, end - 1);
          range.setEnd(text, end);
          return Math.round(range.getBoundingClientRect().right);
        })"""
    )
    assert len(set(ends)) == 1
    # A stock Chromium on Debian has no emoji font: a pictograph there is an empty box.
    drawn = await page.inner_text("body")
    assert not [char for char in drawn if _pictograph(char)]


async def test_every_page_is_usable_at_390_px_with_a_menu_that_folds(
    browser: Browser,  # noqa: F811
    console: Console,
) -> None:
    page = await logged_in(browser, console, viewport=PHONE, is_mobile=True)
    menu = page.get_by_role("button", name="Menu")
    nav = page.locator("header nav")
    assert await menu.is_visible() and await nav.is_hidden()
    top = await page.locator("header.top").bounding_box()
    assert top is not None and top["width"] <= 390 and top["height"] < 70
    await menu.click()
    assert await menu.get_attribute("aria-expanded") == "true"
    for link in await nav.locator("a").all():
        box = await link.bounding_box()
        assert box is not None and box["x"] >= 0 and box["x"] + box["width"] <= 390
    await nav.get_by_text("Tool calls").click()
    await page.wait_for_selector("[data-testid=tool-calls]")
    assert await nav.is_hidden() and await menu.get_attribute("aria-expanded") == "false"

    pages = ["#/conversations", f"#/conversation/{console.seeded.private_id}",
             f"#/context/{console.seeded.private_id}", "#/memory", "#/personas", "#/approvals",
             "#/pairings", "#/health"]  # fmt: skip
    for hash_ in pages:
        await page.goto(f"{console.base_url}/admin{hash_}")
        # Loaded afresh, so the page waited for is this one, not the one before it.
        await page.reload()
        await page.wait_for_selector("#page[data-page]:not([data-loading])")
        # Nothing sticks out: the page never scrolls sideways.
        assert await page.evaluate("document.documentElement.scrollWidth") <= 390, hash_
        assert await page.locator("#page").bounding_box() is not None

    await page.goto(f"{console.base_url}/admin#/conversations")
    search = page.locator("input[type=search]")
    await search.wait_for()
    # A row is a card whose cells say which column they are.
    messages = page.locator("[data-testid=conversations] td[data-label=Messages]").first
    assert await messages.evaluate("cell => getComputedStyle(cell, '::before').content") != "none"
    assert await page.locator("[data-testid=conversations] thead").is_hidden()
    # The whole hint fits in the box.
    fits = await search.evaluate(
        """box => {
          const style = getComputedStyle(box);
          const context = document.createElement('canvas').getContext('2d');
          context.font = style.font;
          const room = box.clientWidth - parseFloat(style.paddingLeft) - parseFloat(style.paddingRight);
          return context.measureText(box.placeholder).width <= room;
        }"""
    )
    assert fits


async def test_the_tool_calls_page_ends_at_its_table_and_the_context_page_names_its_window_once(
    browser: Browser,  # noqa: F811
    console: Console,
) -> None:
    page = await logged_in(browser, console)
    await page.click("[data-nav=approvals]")
    await page.wait_for_selector("[data-testid=tool-calls]")
    assert await page.locator("[data-role=older]").count() == 0
    after_table = await page.evaluate(
        "() => [...document.querySelector('#page').childNodes].slice(-1).map(node => node.textContent)"
    )
    assert "null" not in await page.inner_text("#page") and after_table != ["null"]

    await page.goto(f"{console.base_url}/admin#/context/{console.seeded.private_id}")
    await page.wait_for_selector("[data-testid=context-bar]")
    text = await page.inner_text("#page")
    assert text.count("Window") == 1 and "Window: " in text
