"""The widget in headless Chromium against a real uvicorn server on 127.0.0.1."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from pathlib import Path

import pytest_asyncio
from playwright.async_api import Browser, Page, Route, async_playwright

from bot.providers.openai import OpenAICompatibleProvider
from channels.web.app import create_app
from tests.fakes.openai_server import FakeOpenAI, Hang, Reply, ToolCalls
from tests.support.files import png_image
from tests.support.live_server import LiveServer
from tests.support.peers import CHROMIUM_PATH, needs_chromium
from tests.support.runtime import make_runtime
from tests.support.tools import RAW_RESULT, HeldTool

CHROMIUM = str(CHROMIUM_PATH)
CHROMIUM_ARGS = [
    "--no-sandbox",
    "--disable-gpu",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--no-first-run",
    "--disable-quic",
]
ASSISTANT = "[data-author=assistant]"
REASONING = "Two and two make four."
FINISHED_ASSISTANT = "[data-author=assistant][data-message-id]"

pytestmark = needs_chromium


@pytest_asyncio.fixture
async def browser() -> AsyncIterator[Browser]:
    async with async_playwright() as playwright:
        launched = await playwright.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS)
        yield launched
        await launched.close()


@pytest_asyncio.fixture
async def server(tmp_path: Path) -> AsyncIterator[LiveServer]:
    runtime = make_runtime(tmp_path)
    async with LiveServer(create_app(runtime)) as live:
        yield live
    await runtime.aclose()


async def open_demo(browser: Browser, base_url: str, **context_options: object) -> Page:
    context = await browser.new_context(**context_options)  # type: ignore[arg-type]
    page = await context.new_page()
    await page.goto(base_url + "/")
    await page.wait_for_selector("#chorus-widget[data-ready]", state="attached")
    return page


async def send(page: Page, text: str) -> None:
    before = await page.locator(FINISHED_ASSISTANT).count()
    await page.fill("textarea", text)
    await page.press("textarea", "Enter")
    await page.wait_for_function(
        "n => document.querySelector('#chorus-widget').shadowRoot"
        ".querySelectorAll('[data-author=assistant][data-message-id]').length > n",
        arg=before,
    )


async def test_reply_streams_into_the_bubble_as_it_arrives(
    runtimes, browser: Browser, tmp_path: Path, fake_openai: FakeOpenAI
) -> None:
    words = ["Streams ", "arrive ", "one ", "piece ", "at ", "a ", "time."]
    fake_openai.script(Reply("".join(words), chunks=words, delay=0.12))
    runtime = runtimes(tmp_path, provider=OpenAICompatibleProvider(fake_openai.base_url))
    async with LiveServer(create_app(runtime)) as live:
        page = await open_demo(browser, live.base_url)
        # Record every text the assistant bubble shows while the reply streams in.
        await page.evaluate(
            """() => {
              window.__seen = [];
              const log = document.querySelector('#chorus-widget').shadowRoot.querySelector('.log');
              new MutationObserver(() => {
                const bubble = log.querySelector('[data-author=assistant] .text');
                if (bubble) window.__seen.push(bubble.textContent);
              }).observe(log, {childList: true, subtree: true, characterData: true});
            }"""
        )
        await send(page, "hello")
        seen: list[str] = await page.evaluate("window.__seen")
    partial = [text for text in seen if text and text != "Streams arrive one piece at a time."]
    assert "Streams arrive " in partial and "Streams arrive one piece at a " in partial
    bubble = page.locator(ASSISTANT).last
    assert await bubble.locator(".text").inner_text() == "Streams arrive one piece at a time."
    assert await bubble.locator(".persona").inner_text() == "ADA"  # shown in capitals by CSS


async def test_switching_persona_tags_the_next_bubble(browser: Browser, server: LiveServer) -> None:
    page = await open_demo(browser, server.base_url)
    await send(page, "first")
    await page.select_option("select.persona-picker", "captain")
    await page.wait_for_selector("[data-role=notice]:has-text('Switched to Captain Reed')")
    await send(page, "second")
    bubbles = page.locator(ASSISTANT)
    assert await bubbles.nth(0).get_attribute("data-persona-id") == "ada"
    assert await bubbles.nth(1).get_attribute("data-persona-id") == "captain"
    assert await bubbles.nth(1).locator(".persona").text_content() == "Captain Reed"
    assert "Captain Reed (persona captain)" in await bubbles.nth(1).locator(".text").inner_text()


async def test_image_attachment_previews_sends_and_comes_back_after_reload(
    browser: Browser, server: LiveServer, tmp_path: Path
) -> None:
    image = tmp_path / "chart.png"
    image.write_bytes(png_image(80, 60))
    page = await open_demo(browser, server.base_url)
    await page.set_input_files("input[type=file]", str(image))
    preview = page.locator("[data-role=pending-file] img")
    await preview.wait_for()
    assert await preview.evaluate("img => img.naturalWidth") == 80
    await send(page, "what is in this chart?")
    assert "1 attachment" in await page.locator(ASSISTANT).last.inner_text()
    assert await page.locator("[data-role=pending-file]").count() == 0

    await page.reload()
    stored = page.locator("[data-author=user] .files img")
    await stored.wait_for()
    await page.wait_for_function(
        "() => document.querySelector('#chorus-widget').shadowRoot"
        ".querySelector('[data-author=user] .files img').naturalWidth === 80"
    )


async def test_conversation_is_restored_after_a_reload(browser: Browser, server: LiveServer) -> None:
    page = await open_demo(browser, server.base_url)
    await send(page, "remember the number 42")
    await page.reload()
    await page.wait_for_selector("#chorus-widget[data-ready]", state="attached")
    messages = page.locator("[data-role=message]")
    assert await messages.count() == 2
    assert await messages.nth(0).inner_text() == "remember the number 42"
    assert "remember the number 42" in await messages.nth(1).inner_text()


async def test_markup_in_messages_is_shown_as_text_and_never_runs(
    browser: Browser, server: LiveServer
) -> None:
    attack = '<img src=x onerror="window.__xss=1"><script>window.__xss=2</script>'
    page = await open_demo(browser, server.base_url)
    await send(page, attack)
    for _ in range(2):
        user = page.locator("[data-author=user]").first
        assert await user.inner_text() == attack
        assert await page.locator("[data-role=message] img, [data-role=message] script").count() == 0
        assert await page.evaluate("window.__xss") is None
        await page.reload()
        await page.wait_for_selector(FINISHED_ASSISTANT)


async def test_unreachable_server_and_failed_requests_show_a_clear_message(
    browser: Browser, server: LiveServer
) -> None:
    page = await open_demo(browser, server.base_url)
    await page.context.set_offline(True)
    await page.fill("textarea", "are you there?")
    await page.press("textarea", "Enter")
    alert = page.locator("[role=alert]")
    await alert.wait_for()
    assert "Can't reach the chat server" in await alert.inner_text()
    assert await page.locator(".msg.error .retry").count() == 1

    await page.context.set_offline(False)
    await page.click(".msg.error .retry")
    await page.wait_for_selector(FINISHED_ASSISTANT)
    assert await alert.is_hidden()
    await page.route(
        "**/api/sessions/*/messages",
        lambda route: route.fulfill(
            status=429, json={"detail": "You are sending messages too fast (limit: 30 a minute)."}
        ),
    )
    await page.fill("textarea", "again")
    await page.press("textarea", "Enter")
    await page.wait_for_selector("[role=alert]:has-text('too fast')")


async def test_panel_fills_a_phone_width_screen(browser: Browser, server: LiveServer) -> None:
    page = await open_demo(browser, server.base_url, viewport={"width": 375, "height": 667}, is_mobile=True)
    box = await page.locator("section.panel").bounding_box()
    assert box is not None and box["width"] == 375 and box["height"] == 667
    await send(page, "hi from a phone")
    composer = await page.locator("textarea").bounding_box()
    assert composer is not None and composer["y"] + composer["height"] <= 667


def shadow(script: str) -> str:
    """A page function body with `root` bound to the widget's shadow root."""
    return f"() => {{ const root = document.querySelector('#chorus-widget').shadowRoot; {script} }}"


async def test_after_a_reload_commands_their_answers_and_persona_switches_are_shown(
    browser: Browser, server: LiveServer
) -> None:
    page = await open_demo(browser, server.base_url)
    await send(page, "hello")
    await page.fill("textarea", "/help")
    await page.press("textarea", "Enter")
    await page.wait_for_selector("[data-role=notice]:has-text('/persona')")
    await page.select_option("select.persona-picker", "sage")
    await page.wait_for_selector("[data-role=notice]:has-text('Switched to Sage')")

    await page.reload()
    await page.wait_for_selector("#chorus-widget[data-ready]", state="attached")
    commands = page.locator("[data-role=command]")
    assert [await commands.nth(i).inner_text() for i in range(await commands.count())] == [
        "/help",
        "/persona sage",
    ]
    events = page.locator("[data-event]")
    kinds = [await events.nth(i).get_attribute("data-event") for i in range(await events.count())]
    assert kinds == ["command", "command_reply", "command", "persona_switch", "command_reply"]
    assert await page.locator("[data-event=persona_switch]").inner_text() == "Now speaking: Sage"
    assert "/persona" in await page.locator("[data-event=command_reply]").first.inner_text()


async def test_the_view_scrolls_to_the_reply_after_an_image_loads(
    browser: Browser, server: LiveServer, tmp_path: Path
) -> None:
    image = tmp_path / "tall.png"
    image.write_bytes(png_image(160, 160))
    page = await open_demo(browser, server.base_url)
    for number in range(4):
        await send(page, f"message {number}")
    await page.set_input_files("input[type=file]", str(image))
    await send(page, "and a picture")

    # After the reload the image arrives only once the history is on screen and scrolled down.
    release = asyncio.Event()

    async def hold_image(route: Route) -> None:
        await release.wait()
        await route.continue_()

    await page.route("**/api/attachments/*", hold_image)
    await page.reload()
    await page.wait_for_selector("#chorus-widget[data-ready]", state="attached")
    at_bottom = (
        "const log = root.querySelector('.log');"
        " return log.scrollHeight - log.scrollTop - log.clientHeight < 2;"
    )
    assert await page.evaluate(
        shadow(
            "return root.querySelector('.log').scrollHeight > root.querySelector('.log').clientHeight + 200;"
        )
    )
    assert await page.evaluate(shadow(at_bottom))
    release.set()
    await page.wait_for_function(shadow("return root.querySelector('.files img').naturalWidth === 160;"))
    await page.wait_for_function(shadow(at_bottom))


async def test_a_refused_file_gets_the_reason_and_no_retry(
    browser: Browser, server: LiveServer, tmp_path: Path
) -> None:
    program = tmp_path / "setup.exe"
    program.write_bytes(b"MZ\x90\x00")
    page = await open_demo(browser, server.base_url)
    await page.set_input_files("input[type=file]", str(program))
    await page.fill("textarea", "install this")
    await page.press("textarea", "Enter")
    refused = page.locator(".msg.error")
    await refused.wait_for()
    text = await refused.inner_text()
    for name in ("PNG", "JPEG", "GIF", "WebP", "PDF", "TXT", "Markdown", "CSV", "JSON"):
        assert name in text
    assert await page.locator(".retry").count() == 0
    assert await page.locator("[role=alert] button").is_hidden()


async def test_on_a_desktop_the_panel_docks_in_the_corner_and_can_be_minimised(
    browser: Browser, server: LiveServer
) -> None:
    page = await open_demo(browser, server.base_url, viewport={"width": 1280, "height": 800})
    panel = page.locator("section.panel")
    content = page.locator("main")
    box, text = await panel.bounding_box(), await content.bounding_box()
    assert box is not None and text is not None
    # A corner panel, and the page's content stays beside it, not under it.
    assert box["width"] < 420 and box["x"] + box["width"] <= 1280 and box["y"] + box["height"] <= 800
    assert text["x"] + text["width"] <= box["x"]
    await page.click("button.minimise")
    minimised = await panel.bounding_box()
    assert minimised is not None and minimised["height"] < 80
    assert await page.locator("textarea").is_hidden()
    recentred = await content.bounding_box()
    assert recentred is not None and recentred["x"] > text["x"]
    await page.click("button.minimise")
    assert await page.locator("textarea").is_visible()
    await send(page, "still here")


async def test_buttons_are_drawn_icons_with_names_never_emoji(
    browser: Browser, server: LiveServer, tmp_path: Path
) -> None:
    notes = tmp_path / "notes.txt"
    notes.write_text("The launch moved to Friday.")
    page = await open_demo(browser, server.base_url)
    await page.set_input_files("input[type=file]", str(notes))
    await send(page, "my notes")
    # After a reload the sent document is a button that downloads it; two files wait to be sent.
    await page.reload()
    await page.wait_for_selector("#chorus-widget[data-ready]", state="attached")
    await page.locator("input[type=file]").set_input_files(
        files=[
            {"name": "song.mp3", "mimeType": "audio/mpeg", "buffer": b"ID3"},
            {"name": "plan.txt", "mimeType": "text/plain", "buffer": b"the plan"},
        ]
    )
    await page.locator("[data-role=pending-file]").nth(1).wait_for()
    # A stock Chromium on Debian has no emoji font: a pictograph there is an empty box.
    controls = await page.evaluate(
        """() => [...document.querySelector('#chorus-widget').shadowRoot
              .querySelectorAll('button, .chip')].map(node => ({
            label: node.getAttribute('aria-label'),
            text: node.textContent.trim(),
            icons: [...node.querySelectorAll('svg')].map(svg => svg.dataset.icon),
            emoji: /\\p{Extended_Pictographic}/u.test(node.textContent),
          }))"""
    )
    assert [control for control in controls if control["emoji"]] == []
    wordless = [control for control in controls if not control["text"]]
    assert wordless and all(control["icons"] and control["label"] for control in wordless)
    icons = {control["label"]: control["icons"] for control in controls if control["label"]}
    assert icons["Close chat"] == ["close"] and icons["Minimise chat"] == ["minimise"]
    assert icons["Attach files"] == ["attach"] and icons["Record a voice message"] == ["microphone"]
    assert icons["Remove song.mp3"] == ["close"] and icons["Remove plan.txt"] == ["close"]
    assert icons["Download notes.txt"] == ["document"]
    chips = {
        control["text"]: control["icons"] for control in controls if control["text"] and control["icons"]
    }
    assert chips == {"notes.txt": ["document"], "song.mp3": ["audio"], "plan.txt": ["document"]}


async def test_stop_ends_a_streaming_reply_and_shows_it_stopped(
    runtimes, browser: Browser, tmp_path: Path, fake_openai: FakeOpenAI
) -> None:
    fake_openai.script(Hang(seconds=60, after_text="Once upon a time"), "A short answer.")
    runtime = runtimes(tmp_path, provider=OpenAICompatibleProvider(fake_openai.base_url))
    async with LiveServer(create_app(runtime)) as live:
        page = await open_demo(browser, live.base_url)
        await page.fill("textarea", "tell me a long story")
        await page.press("textarea", "Enter")
        await page.wait_for_selector("[data-author=assistant] .text:has-text('Once upon a time')")
        assert await page.locator("button.send").is_hidden()
        await page.click("button.stop")
        stopped = page.locator("[data-author=assistant][data-status=stopped]")
        await stopped.wait_for()
        assert await stopped.locator(".text").inner_text() == "Once upon a time\n\n[Stopped.]"
        assert await page.locator("button.stop").is_hidden()
        await send(page, "and now?")
        assert "A short answer." in await page.locator(ASSISTANT).last.inner_text()
        [(session, _count)] = runtime.stores.sessions.list_sessions()
        messages = runtime.stores.messages.messages(session.id)
    assert [(m.role, m.status) for m in messages if m.role == "assistant"][0] == ("assistant", "interrupted")


async def test_a_tool_call_shows_a_progress_line_in_the_bubble_then_the_answer(
    runtimes, browser: Browser, tmp_path: Path, fake_openai: FakeOpenAI
) -> None:
    fake_openai.script(ToolCalls([("lookup", {"query": "dentist"})], text="Let me check. "), "On Tuesday.")
    runtime = runtimes(tmp_path, provider=OpenAICompatibleProvider(fake_openai.base_url))
    held = HeldTool().install(runtime)
    async with LiveServer(create_app(runtime)) as live:
        page = await open_demo(browser, live.base_url)
        await page.fill("textarea", "when is my dentist?")
        await page.press("textarea", "Enter")
        line = page.locator(f"{ASSISTANT} .tools .tool")
        await line.wait_for()
        # A drawn mark, then the words: never an emoji, which needs a font a system may lack.
        assert await line.inner_text() == "lookup: dentist"
        assert await line.locator("svg").get_attribute("aria-label") == "Tool call"
        assert await line.get_attribute("data-status") == "started"
        # The round's own words give way to the progress line.
        assert await page.locator(f"{ASSISTANT} .text").inner_text() == ""
        held.release.set()
        await page.wait_for_selector(FINISHED_ASSISTANT)
        bubble = page.locator(ASSISTANT).last
        assert await bubble.locator(".text").inner_text() == "On Tuesday."
        assert await bubble.locator(".tool").get_attribute("data-status") == "done"

        await page.reload()
        await page.wait_for_selector("#chorus-widget[data-ready]", state="attached")
        await page.wait_for_selector(FINISHED_ASSISTANT)
        notice = page.locator("[data-event=tool]")
        assert await notice.inner_text() == "lookup: dentist"
        assert await notice.locator("svg").get_attribute("data-icon") == "tool"
        everything = await page.locator(".log").inner_text()
    assert RAW_RESULT not in everything and "Let me check" not in everything


async def test_the_offline_demo_model_uses_tools_as_a_newcomer_sees_it(
    browser: Browser, server: LiveServer
) -> None:
    page = await open_demo(browser, server.base_url)
    await send(page, "my dentist appointment is on Tuesday")

    await send(page, "what did I say about the dentist?")
    recall = page.locator(ASSISTANT).last
    assert await recall.locator(".tool").inner_text() == "recall: the dentist"
    answer = await recall.locator(".text").inner_text()
    # Said a moment ago: the tool finds it and says it is still in the conversation.
    assert answer.startswith("[demo] That is still in our conversation, message #1: “my dentist appointment")

    await send(page, "how full is your context?")
    inspect = page.locator(ASSISTANT).last
    assert await inspect.locator(".tool").inner_text() == "context_inspect"
    assert (await inspect.locator(".text").inner_text()).startswith("[demo] My context holds")


async def test_reasoning_on_shows_the_thinking_folded_beside_the_reply(
    runtimes, browser: Browser, tmp_path: Path, fake_openai: FakeOpenAI
) -> None:
    runtime = runtimes(tmp_path, provider=OpenAICompatibleProvider(fake_openai.base_url))
    async with LiveServer(create_app(runtime)) as live:
        page = await open_demo(browser, live.base_url)
        await page.fill("textarea", "/reasoning on")
        await page.press("textarea", "Enter")
        await page.get_by_text("Reasoning is on").wait_for()
        fake_openai.script(Reply("It is 4.", reasoning=REASONING))
        await send(page, "2+2?")

        fold = page.locator("details[data-role=reasoning]")
        assert await fold.count() == 1
        assert await fold.get_attribute("open") is None
        assert (await fold.inner_text()).strip().startswith("Thinking")
        await fold.locator("summary").click()
        assert REASONING in await fold.inner_text()

        await page.reload()
        await page.wait_for_selector("#chorus-widget[data-ready]", state="attached")
        await page.locator("details[data-role=reasoning]").first.wait_for(state="attached")
        assert await page.locator("[data-event=reasoning]").count() == 1
