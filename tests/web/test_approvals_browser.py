"""The widget's Run and Deny buttons in headless Chromium, for the npm filesystem MCP server's
`write_file` (its server marks it destructive, so it waits for the visitor's yes)."""

from __future__ import annotations

from pathlib import Path

from playwright.async_api import Browser

from channels.web.app import create_app
from tests.fakes.openai_server import FakeOpenAI, ToolCalls
from tests.support.live_server import LiveServer
from tests.tools.mcp_support import npm_server
from tests.tools.test_mcp_turns import started_runtime
from tests.web.test_widget_browser import ASSISTANT, FINISHED_ASSISTANT, browser, open_demo  # noqa: F401

WRITE = "fs__write_file"


def writes(folder: Path, text: str) -> ToolCalls:
    return ToolCalls([(WRITE, {"path": str(folder / "note.txt"), "content": text})])


async def test_a_visitor_runs_a_destructive_call_with_the_widgets_run_button(
    runtimes,
    browser: Browser,  # noqa: F811
    tmp_path: Path,
    fake_openai: FakeOpenAI,
) -> None:
    folder = tmp_path / "files"
    folder.mkdir()
    fake_openai.script(writes(folder, "buy milk"), "Written down.")
    runtime = await started_runtime(runtimes, tmp_path, fake_openai, fs=npm_server("filesystem", str(folder)))
    async with LiveServer(create_app(runtime)) as live:
        page = await open_demo(browser, live.base_url)
        await page.fill("textarea", "Write down: buy milk")
        await page.press("textarea", "Enter")
        line = page.locator(f"{ASSISTANT} .tools .tool")
        run = line.locator("[data-role=approve]")
        await run.wait_for()
        assert await line.get_attribute("data-status") == "asked"
        assert not (folder / "note.txt").exists()
        await run.click()
        await page.wait_for_selector(FINISHED_ASSISTANT)
        bubble = page.locator(ASSISTANT).last
        assert await bubble.locator(".text").inner_text() == "Written down."
        assert await bubble.locator(".tool").get_attribute("data-status") == "done"

    assert (folder / "note.txt").read_text() == "buy milk"
    (approval,) = runtime.stores.approvals.recent(5)
    assert (approval.tool_name, approval.state, approval.outcome) == (WRITE, "approved", "ok")
    assert approval.decided_by is not None and approval.decided_by.startswith("web:")


async def test_a_visitor_denies_a_call_and_the_file_is_never_written(
    runtimes,
    browser: Browser,  # noqa: F811
    tmp_path: Path,
    fake_openai: FakeOpenAI,
) -> None:
    folder = tmp_path / "files"
    folder.mkdir()
    fake_openai.script(writes(folder, "sell the car"), "I left it alone.")
    runtime = await started_runtime(runtimes, tmp_path, fake_openai, fs=npm_server("filesystem", str(folder)))
    async with LiveServer(create_app(runtime)) as live:
        page = await open_demo(browser, live.base_url)
        await page.fill("textarea", "Write down: sell the car")
        await page.press("textarea", "Enter")
        deny = page.locator(f"{ASSISTANT} .tools .tool [data-role=deny]")
        await deny.wait_for()
        await deny.click()
        await page.wait_for_selector(FINISHED_ASSISTANT)
        bubble = page.locator(ASSISTANT).last
        assert await bubble.locator(".tool").get_attribute("data-status") == "denied"
        assert await bubble.locator(".text").inner_text() == "I left it alone."

    assert not (folder / "note.txt").exists()
    (approval,) = runtime.stores.approvals.recent(5)
    assert approval.state == "denied"
