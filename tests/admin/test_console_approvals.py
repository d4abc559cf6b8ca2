"""The console's Tool calls page in headless Chromium: a member's call waiting for approval is
listed with who asked, the operator runs it from there, and /metrics counts asked, approved,
denied and expired."""

from __future__ import annotations

from pathlib import Path

from playwright.async_api import Browser

from channels.web.app import create_app
from tests.admin.seed import Seeded, admin_runtime
from tests.admin.test_console_browser import Console, browser, logged_in  # noqa: F401
from tests.admin.test_metrics import scrape, value
from tests.fakes.openai_server import FakeOpenAI, ToolCalls
from tests.support.live_server import LiveServer
from tests.support.peers import needs_chromium
from tests.tools.test_approvals import Notebook, approval_id, turn

APPROVALS = "chorus_tool_approvals_total"


@needs_chromium
async def test_the_operator_sees_who_asked_and_runs_the_call_from_the_console(
    browser: Browser,  # noqa: F811
    tmp_path: Path,
    fake_openai: FakeOpenAI,
) -> None:
    fake_openai.script(ToolCalls([("write_note", {"text": "order paper"})]), "Ordered.")
    asking = {"write_note": {"members": "ask"}}
    runtime = admin_runtime(tmp_path, model_base_url=fake_openai.base_url, tools_approve=asking)
    notebook = Notebook().install(runtime)
    try:
        async with (
            LiveServer(create_app(runtime)) as live,
            turn(runtime, "order paper", lane="telegram", user_id="77", display_name="Maya") as running,
        ):
            asked = await running.asked()
            page = await logged_in(browser, Console(live.base_url, runtime, Seeded("", ""), ""))
            await page.click("[data-nav=approvals]")
            row = page.locator(f"tr[data-approval='{approval_id(asked)}']")
            await row.wait_for()
            assert "write_note" in await row.inner_text() and "order paper" in await row.inner_text()
            assert "Maya" in await row.inner_text()
            assert await row.locator("[data-role=state]").inner_text() == "pending"

            await row.locator("[data-role=approve]").click()
            reply = await running.reply()
            await page.wait_for_function(
                "() => document.querySelector('[data-approval] [data-role=result]')?.textContent === 'ok'"
            )
            assert await row.locator("[data-role=state]").inner_text() == "approved"
            assert (await row.locator("[data-role=decided-by]").inner_text()).startswith("operator, ")

            # The conversation's transcript shows the decision beside the call.
            await row.locator("a").click()
            beside = page.locator(f"[data-call-id='{asked.call_id}'] [data-role=approval]")
            await beside.wait_for()
            shown = await beside.inner_text()
            assert shown.startswith("asked by Maya ") and " · approved by operator " in shown
    finally:
        await runtime.aclose()
    assert reply.text == "Ordered."
    assert notebook.written == ["order paper"]


async def test_metrics_count_asked_approved_denied_and_expired(
    tmp_path: Path, fake_openai: FakeOpenAI
) -> None:
    fake_openai.script(
        ToolCalls([("write_note", {"text": "one"})]),
        "1",
        ToolCalls([("write_note", {"text": "two"})]),
        "2",
        ToolCalls([("write_note", {"text": "three"})]),
        "3",
    )
    runtime = admin_runtime(
        tmp_path,
        model_base_url=fake_openai.base_url,
        tools_approve={"write_note": {"members": "ask"}},
        tools_approval_seconds=0.5,
    )
    Notebook().install(runtime)
    try:
        before = await scrape(runtime)
        for answer in (True, False, None):
            async with turn(runtime, "note") as running:
                asked = await running.asked()
                if answer is not None:
                    assert (await runtime.engine.approvals.decide(approval_id(asked), answer, "web:u1")).ok
                await running.reply()
        after = await scrape(runtime)
    finally:
        await runtime.aclose()

    def counted(outcome: str) -> float:
        return value(after, APPROVALS, outcome=outcome) - value(before, APPROVALS, outcome=outcome)

    assert [counted(outcome) for outcome in ("asked", "approved", "denied", "expired")] == [3, 1, 1, 1]
