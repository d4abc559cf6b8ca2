"""Replies rendered as Markdown in the widget, in headless Chromium: as they stream, inert when hostile,
usable when huge or wide, and drawn without a glyph that needs an emoji font."""

from __future__ import annotations

from pathlib import Path

from playwright.async_api import Browser, Page, Route

from bot.providers.openai import OpenAICompatibleProvider
from channels.web.app import create_app
from tests.fakes.openai_server import FakeOpenAI, Reply, ToolCalls
from tests.support.live_server import LiveServer
from tests.support.tools import HeldTool
from tests.web.replies import FRUITS, HOSTILE, WIDE_TABLE, by_lines, long_code
from tests.web.test_widget_browser import (  # noqa: F401
    ASSISTANT,
    FINISHED_ASSISTANT,
    browser,
    open_demo,
    send,
    shadow,
)

REPLY_TEXT = f"{ASSISTANT} .text"
# Every element of the rendered reply that can run script, load something, or act on its own.
ACTIVE = (
    "script, img, iframe, svg:not([data-icon]), object, embed, form, style, link, meta, base, audio, video, "
    "input:not([disabled])"
)


async def open_without_policy(
    browser: Browser,  # noqa: F811
    base_url: str,
    **context_options: object,
) -> Page:
    """The demo page without its Content-Security-Policy: embedding pages often have none, so the
    widget itself must keep replies inert."""
    context = await browser.new_context(**context_options)  # type: ignore[arg-type]
    page = await context.new_page()

    async def without_policy(route: Route) -> None:
        response = await route.fetch()
        headers = {k: v for k, v in response.headers.items() if k.lower() != "content-security-policy"}
        await route.fulfill(response=response, headers=headers)

    await page.route(base_url + "/", without_policy)
    await page.goto(base_url + "/")
    await page.wait_for_selector("#chorus-widget[data-ready]", state="attached")
    return page


async def watch_reply(page: Page) -> None:
    """Records, while replies stream, every code box the bubble ever held, whether each kind of block
    was first drawn while the reply streamed, and which heading, table and code block were on screen
    when the block after each first appeared (when it was finished)."""
    await page.evaluate(
        shadow(
            """
            window.__made = { pre: new Set() };
            window.__drawnWhileStreaming = {};
            window.__finished = {};
            window.__highlightedWhileOpen = false;
            const kinds = { heading: 'h2', table: '.table-wrap', code: '.code-block' };
            new MutationObserver(() => {
              const bubble = [...root.querySelectorAll('[data-author=assistant]')].pop();
              if (!bubble) return;
              for (const node of bubble.querySelectorAll('.text pre')) window.__made.pre.add(node);
              for (const [kind, selector] of Object.entries(kinds)) {
                const node = bubble.querySelector('.text ' + selector);
                if (!node) continue;
                if (!(kind in window.__drawnWhileStreaming)) {
                  window.__drawnWhileStreaming[kind] = bubble.classList.contains('streaming');
                }
                if (node.nextElementSibling && !window.__finished[kind]) window.__finished[kind] = node;
              }
              const open = bubble.classList.contains('streaming')
                && bubble.querySelector('.text > .code-block:last-child');
              if (open && open.querySelector('code.hljs')) window.__highlightedWhileOpen = true;
            }).observe(root.querySelector('.log'), { childList: true, subtree: true, characterData: true });
            """
        )
    )


async def still_on_screen_since_finished(page: Page) -> dict[str, bool]:
    """For each kind of block: whether the node drawn when it was finished is the one shown now."""
    return dict(
        await page.evaluate(
            shadow(
                """
                const bubble = [...root.querySelectorAll('[data-author=assistant]')].pop();
                const kinds = { heading: 'h2', table: '.table-wrap', code: '.code-block' };
                return Object.entries(kinds).map(([kind, selector]) => {
                  const finished = window.__finished[kind];
                  return [kind, !!finished && finished === bubble.querySelector('.text ' + selector)];
                });
                """
            )
        )
    )


async def made(page: Page, tag: str) -> int:
    return int(await page.evaluate(f"window.__made.{tag}.size"))


async def test_a_streaming_reply_is_rendered_as_it_arrives_and_its_finished_blocks_are_never_redrawn(
    runtimes,
    browser: Browser,  # noqa: F811
    tmp_path: Path,
    fake_openai: FakeOpenAI,
) -> None:
    fake_openai.script(Reply(FRUITS, chunks=by_lines(FRUITS), delay=0.06))
    runtime = runtimes(tmp_path, provider=OpenAICompatibleProvider(fake_openai.base_url))
    async with LiveServer(create_app(runtime)) as live:
        page = await open_demo(browser, live.base_url)
        await watch_reply(page)
        await send(page, "tell me about fruits")
        # Drawn while the reply still streamed; once finished, a block is left alone while the
        # blocks after it arrive (no flicker, and a selection in it survives).
        assert await page.evaluate("window.__drawnWhileStreaming") == {
            "heading": True,
            "table": True,
            "code": True,
        }
        assert await still_on_screen_since_finished(page) == {"heading": True, "table": True, "code": True}

        reply = page.locator(REPLY_TEXT).last
        assert await reply.locator("h2").inner_text() == "Fruits"
        assert await reply.locator("strong").first.inner_text() == "three fruits"
        assert await reply.locator("em").inner_text() == "why"
        assert await reply.locator("ol > li").count() == 3
        assert await reply.locator("ol ul > li").inner_text() == "rich in potassium"
        assert await reply.locator("table th").all_inner_texts() == ["Fruit", "Colour", "Season"]
        assert await reply.locator("table tbody tr").count() == 2
        assert await reply.locator("blockquote").inner_text() == "A fruit a day keeps the doctor away."
        link = reply.locator("a", has_text="the list")
        assert await link.get_attribute("href") == "https://example.org/fruits"
        assert await link.get_attribute("rel") == "noopener noreferrer"
        assert await link.get_attribute("target") == "_blank"
        code = reply.locator(".code-block")
        assert await code.locator(".code-lang").inner_text() == "python"
        assert await code.locator("code .hljs-keyword").first.inner_text() == "def"
        assert "return fruit in" in await code.locator("pre").inner_text()

        # After a reload the stored reply is rendered the same way.
        await page.reload()
        await page.wait_for_selector(f"{REPLY_TEXT} h2")
        assert await page.locator(f"{REPLY_TEXT} table th").count() == 3
        assert await page.locator(f"{REPLY_TEXT} code .hljs-keyword").count() >= 2


async def test_an_open_code_block_grows_in_place_and_is_highlighted_once_closed(
    runtimes,
    browser: Browser,  # noqa: F811
    tmp_path: Path,
    fake_openai: FakeOpenAI,
) -> None:
    code = long_code(40)
    fake_openai.script(Reply(code, chunks=by_lines(code, 4), delay=0.08))
    runtime = runtimes(tmp_path, provider=OpenAICompatibleProvider(fake_openai.base_url))
    async with LiveServer(create_app(runtime)) as live:
        page = await open_demo(browser, live.base_url)
        await watch_reply(page)
        await send(page, "some code")
        # One box from the first line to the last: more code is added to it, never a new box.
        assert await made(page, "pre") == 1
        assert not await page.evaluate("window.__highlightedWhileOpen")
        block = page.locator(f"{REPLY_TEXT} .code-block")
        assert (await block.locator("pre").inner_text()).count("\n") == 39
        assert await block.locator("code.hljs .hljs-string").count() == 40


async def test_a_5000_line_code_block_streams_stays_in_its_box_and_copies_whole(
    runtimes,
    browser: Browser,  # noqa: F811
    tmp_path: Path,
    fake_openai: FakeOpenAI,
) -> None:
    code = long_code(5000)
    fake_openai.script(Reply(code, chunks=by_lines(code, 250), delay=0.03))
    runtime = runtimes(tmp_path, provider=OpenAICompatibleProvider(fake_openai.base_url))
    async with LiveServer(create_app(runtime)) as live:
        page = await open_demo(browser, live.base_url)
        await page.context.grant_permissions(["clipboard-read", "clipboard-write"], origin=live.base_url)
        await watch_reply(page)
        await send(page, "a very long program")
        assert await made(page, "pre") == 1
        pre = page.locator(f"{REPLY_TEXT} .code-block pre")
        box = await pre.bounding_box()
        assert box is not None and box["height"] < 600
        sizes = await pre.evaluate("pre => [pre.scrollHeight, pre.clientHeight, pre.scrollTop]")
        # Its own scroll box, followed to the newest line while it streamed.
        assert sizes[0] > 20 * sizes[1] and sizes[2] + sizes[1] >= sizes[0] - 30
        # Too long to highlight without holding the page: shown plain, all of it.
        assert await pre.locator("code.hljs").count() == 0
        assert await page.locator(f"{REPLY_TEXT} .code-block[data-plain]").count() == 1
        assert (await pre.inner_text()).count("\n") == 4999
        await page.locator(f"{REPLY_TEXT} [data-role=copy-code]").click()
        await page.wait_for_selector(f"{REPLY_TEXT} [data-role=copy-code][data-copied]")
        copied = await page.evaluate("navigator.clipboard.readText()")
        assert copied == code.removeprefix("```python\n").removesuffix("\n```")
        # The conversation goes on.
        fake_openai.script("Next.")
        await send(page, "thanks")
        assert await page.locator(REPLY_TEXT).last.inner_text() == "Next."


async def test_a_copy_the_browser_refuses_says_so_on_the_button(
    runtimes,
    browser: Browser,  # noqa: F811
    tmp_path: Path,
    fake_openai: FakeOpenAI,
) -> None:
    fake_openai.script("```python\nprint('hi')\n```")
    runtime = runtimes(tmp_path, provider=OpenAICompatibleProvider(fake_openai.base_url))
    async with LiveServer(create_app(runtime)) as live:
        page = await open_demo(browser, live.base_url)
        # A browser that grants neither the clipboard nor a copy of a selection.
        await page.evaluate(
            "() => { navigator.clipboard.writeText = () => Promise.reject(new Error('denied'));"
            " document.execCommand = () => false; }"
        )
        await send(page, "a short program")
        await page.locator(f"{REPLY_TEXT} [data-role=copy-code]").click()
        refused = page.locator(f"{REPLY_TEXT} [data-role=copy-code][data-copy-refused]")
        await refused.wait_for()
        assert await refused.inner_text() == "Copy refused: select the code"
        assert "refused" in (await refused.get_attribute("aria-label") or "")
        assert await page.locator(f"{REPLY_TEXT} [data-copied]").count() == 0


async def test_a_hostile_reply_stays_inert_text_and_safe_links_while_streaming_and_after_a_reload(
    runtimes,
    browser: Browser,  # noqa: F811
    tmp_path: Path,
    fake_openai: FakeOpenAI,
) -> None:
    fake_openai.script(Reply(HOSTILE, chunks=by_lines(HOSTILE), delay=0.03))
    runtime = runtimes(tmp_path, provider=OpenAICompatibleProvider(fake_openai.base_url))
    async with LiveServer(create_app(runtime)) as live:
        page = await open_without_policy(browser, live.base_url)
        popups: list[object] = []
        page.context.on("page", lambda opened: popups.append(opened))
        await send(page, "show me something")
        for _ in range(2):
            reply = page.locator(REPLY_TEXT).last
            await reply.locator("a", has_text="a safe link").wait_for()
            assert await reply.locator(ACTIVE).count() == 0
            attributes = await reply.evaluate(
                "text => [...text.querySelectorAll('*')]"
                ".flatMap(node => [...node.attributes].map(attribute => attribute.name))"
            )
            assert not [
                name for name in attributes if name.startswith("on") or name in ("src", "srcdoc", "style")
            ]
            # Raw HTML is shown as the text it is.
            shown = await reply.inner_text()
            assert (
                "<script>window.__xss = 1</script>" in shown
                and '<img src=x onerror="window.__xss = 2">' in shown
            )
            assert "<b>bold?</b>" in shown
            # A block of HTML is a paragraph of its text.
            script = reply.locator("p").filter(has_text="window.__xss = 1")
            assert await script.inner_text() == "<script>window.__xss = 1</script>"
            links = reply.locator("a[href]")
            hrefs = await links.evaluate_all("links => links.map(a => a.getAttribute('href'))")
            assert hrefs == ["https://tracker.invalid/p.png?secret=1", "https://example.org/safe"]
            assert set(await links.evaluate_all("links => links.map(a => a.rel)")) == {"noopener noreferrer"}
            # Every link without a safe address is words only: clicking it does nothing.
            for index in range(await reply.locator("a:not([href])").count()):
                await reply.locator("a:not([href])").nth(index).click()
            code = reply.locator(".code-block pre")
            assert "<script>window.__xss = 13</script>" in await code.inner_text()
            assert await page.evaluate("window.__xss") is None
            await page.reload()
            await page.wait_for_selector("#chorus-widget[data-ready]", state="attached")
        assert popups == []


async def test_a_wide_table_scrolls_inside_the_reply_on_a_390_px_phone(
    runtimes,
    browser: Browser,  # noqa: F811
    tmp_path: Path,
    fake_openai: FakeOpenAI,
) -> None:
    fake_openai.script(Reply(f"Here it is:\n\n{WIDE_TABLE}\nAnd {long_code(3)}"))
    runtime = runtimes(tmp_path, provider=OpenAICompatibleProvider(fake_openai.base_url))
    async with LiveServer(create_app(runtime)) as live:
        page = await open_demo(browser, live.base_url, viewport={"width": 390, "height": 844}, is_mobile=True)
        await send(page, "a wide table please")
        table = page.locator(f"{REPLY_TEXT} .table-wrap")
        sizes = await table.evaluate("wrap => [wrap.scrollWidth, wrap.clientWidth]")
        assert sizes[0] > sizes[1] + 200
        for selector in (f"{ASSISTANT} >> nth=-1", f"{REPLY_TEXT} .table-wrap", f"{REPLY_TEXT} .code-block"):
            box = await page.locator(selector).bounding_box()
            assert box is not None and box["x"] >= 0 and box["x"] + box["width"] <= 390
        # Neither the conversation nor the page scrolls sideways.
        assert await page.evaluate(
            shadow("const log = root.querySelector('.log'); return log.scrollWidth <= log.clientWidth;")
        )
        assert await page.evaluate("document.documentElement.scrollWidth") <= 390
        cell = await page.locator(f"{REPLY_TEXT} td").first.bounding_box()
        assert cell is not None and cell["height"] < 40


async def test_a_command_reply_keeps_its_lines_and_columns(
    runtimes,
    browser: Browser,  # noqa: F811
    tmp_path: Path,
) -> None:
    runtime = runtimes(tmp_path)
    async with LiveServer(create_app(runtime)) as live:
        page = await open_demo(browser, live.base_url)
        await send(page, "hello")
        for _ in range(2):
            await page.fill("textarea", "/context")
            await page.press("textarea", "Enter")
            notice = page.locator(".command-reply", has_text="system prompt").last
            await notice.wait_for()
            assert "monospace" in await notice.evaluate("node => getComputedStyle(node).fontFamily")
            lines = (await notice.inner_text()).splitlines()
            assert any(line.strip().startswith("system prompt") for line in lines) and len(lines) > 6
            # The token counts of the parts end in one column.
            ends = await notice.evaluate(
                """node => {
                  const text = node.firstChild && node.firstChild.nodeType === 3 ? node.firstChild
                    : node.querySelector('.text').firstChild;
                  const ends = [];
                  for (const part of ['system prompt', 'history', 'tool schemas']) {
                    const start = text.data.indexOf('  ' + part);
                    const end = text.data.indexOf('\\n', start);
                    const range = document.createRange();
                    range.setStart(text, end - 1);
                    range.setEnd(text, end);
                    ends.push(Math.round(range.getBoundingClientRect().right));
                  }
                  return ends;
                }"""
            )
            assert len(set(ends)) == 1
            await page.reload()
            await page.wait_for_selector("#chorus-widget[data-ready]", state="attached")


async def test_tool_steps_thinking_and_reasoning_are_drawn_icons_with_names_never_emoji(
    runtimes,
    browser: Browser,  # noqa: F811
    tmp_path: Path,
    fake_openai: FakeOpenAI,
) -> None:
    fake_openai.script(
        ToolCalls([("lookup", {"query": "dentist"})]),
        Reply(
            "On **Tuesday**.",
            reasoning="The calendar says Tuesday.",
            chunks=["On ", "**Tuesday**."],
            delay=0.3,
        ),
    )
    runtime = runtimes(tmp_path, provider=OpenAICompatibleProvider(fake_openai.base_url))
    held = HeldTool().install(runtime)
    async with LiveServer(create_app(runtime)) as live:
        page = await open_demo(browser, live.base_url)
        await page.fill("textarea", "/reasoning on")
        await page.press("textarea", "Enter")
        await page.get_by_text("Reasoning is on").wait_for()
        await page.evaluate(
            shadow(
                """
                window.__thinkingShown = [];
                new MutationObserver(() => {
                  for (const node of root.querySelectorAll('[data-thinking] [data-role=thinking]')) {
                    const shown = getComputedStyle(node).display !== 'none';
                    if (shown) window.__thinkingShown.push(node.innerHTML);
                  }
                }).observe(root.querySelector('.log'), { childList: true, subtree: true, attributes: true });
                """
            )
        )
        await page.fill("textarea", "when is my dentist?")
        await page.press("textarea", "Enter")
        line = page.locator(f"{ASSISTANT} .tools .tool")
        await line.wait_for()
        assert await line.inner_text() == "lookup: dentist"
        mark = line.locator("svg")
        assert await mark.get_attribute("data-icon") == "tool"
        assert (
            await mark.get_attribute("role") == "img"
            and await mark.get_attribute("aria-label") == "Tool call"
        )
        held.release.set()
        await page.wait_for_selector(FINISHED_ASSISTANT)
        bubble = page.locator(ASSISTANT).last
        assert await bubble.locator(".text strong").inner_text() == "Tuesday"
        thinking = await page.evaluate("window.__thinkingShown")
        assert thinking and all('data-icon="thinking"' in html and "thinking…" in html for html in thinking)
        fold = bubble.locator("details[data-role=reasoning] summary")
        assert await fold.inner_text() == "Thinking"
        assert await fold.locator("svg").get_attribute("data-icon") == "thinking"

        await page.reload()
        await page.wait_for_selector(FINISHED_ASSISTANT)
        stored = page.locator("[data-event=tool] .tool")
        assert await stored.inner_text() == "lookup: dentist"
        assert await stored.locator("svg").get_attribute("aria-label") == "Tool call"
        # A stock Chromium on Debian has no emoji font: a pictograph there is an empty box.
        drawn = await page.evaluate(shadow("return root.querySelector('.panel').innerText;"))
        styles = await page.evaluate(shadow("return root.querySelector('style').textContent;"))
    assert "lookup: dentist" in drawn
    for text in (drawn, styles):
        assert not any(_pictograph(char) for char in text), text


def _pictograph(char: str) -> bool:
    """Whether `char` is drawn from an emoji font (the pictographic planes and the dingbats)."""
    return 0x1F000 <= ord(char) <= 0x1FAFF or 0x2600 <= ord(char) <= 0x27BF or char == "\ufe0f"


async def test_the_one_script_tag_leaves_the_embedding_pages_globals_alone(
    runtimes,
    browser: Browser,  # noqa: F811
    tmp_path: Path,
    fake_openai: FakeOpenAI,
) -> None:
    fake_openai.script("A **bold** answer.")
    runtime = runtimes(tmp_path, provider=OpenAICompatibleProvider(fake_openai.base_url))
    async with LiveServer(create_app(runtime)) as live:
        page = await (await browser.new_context()).new_page()
        host = (
            "<!doctype html><html><body><p>A shop's page.</p>"
            "<script>window.marked = 'the page\\'s own';</script>"
            '<script src="/widget.js" data-open="true"></script></body></html>'
        )
        await page.route(
            live.base_url + "/shop", lambda route: route.fulfill(body=host, content_type="text/html")
        )
        await page.goto(live.base_url + "/shop")
        await page.wait_for_selector("#chorus-widget[data-ready]", state="attached")
        await send(page, "hello")
        assert await page.locator(f"{REPLY_TEXT} strong").inner_text() == "bold"
        leaked = await page.evaluate(
            "() => [window.marked, typeof DOMPurify, typeof hljs, typeof ChorusRender, typeof RENDER_CSS]"
        )
    assert leaked == ["the page's own", "undefined", "undefined", "undefined", "undefined"]
