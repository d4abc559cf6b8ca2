"""The console's Tool calls page: every call the model made, with who asked and, for a call that
waited for approval, who decided (in headless Chromium the operator runs a waiting call from
there), read a page at a time through an index; /metrics counts asked, approved, denied and
expired."""

from __future__ import annotations

import asyncio
from dataclasses import dataclass
from pathlib import Path

import httpx
from playwright.async_api import Browser

from bot.console import Console as ConsoleData
from bot.runtime import Runtime
from bot.tools.base import FunctionTool, ToolContext
from bot.tools.registry import StaticTools
from channels.web.app import create_app
from tests.admin.conftest import BASE_URL
from tests.admin.seed import BEARER, Seeded, admin_runtime
from tests.admin.test_console_browser import Console, browser, logged_in  # noqa: F401
from tests.admin.test_metrics import scrape, value
from tests.fakes.openai_server import FakeOpenAI, ToolCalls
from tests.support.live_server import LiveServer
from tests.support.peers import needs_chromium
from tests.tools.test_approvals import Note, Notebook, approval_id, turn

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
    notebook = Notebook(gate=asyncio.Event()).install(runtime)
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

            # The call runs after the decision; the page shows it running, then its result.
            await row.locator("[data-role=approve]").click()
            await page.wait_for_function(
                "() => document.querySelector('[data-approval] [data-role=result]')?.textContent"
                " === 'running…'"
            )
            assert notebook.gate is not None
            notebook.gate.set()
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


@dataclass
class Lookup:
    """`look_up {text}`: a read-only tool every member may call without asking."""

    def install(self, runtime: Runtime) -> None:
        async def look_up(context: ToolContext, arguments: Note) -> object:
            return {"found": arguments.text}

        runtime.tools.add_source(
            StaticTools([FunctionTool("look_up", "Look up.", Note, look_up, read_only=True)])
        )


async def test_the_tool_calls_page_lists_every_call_with_who_asked_and_who_decided(
    tmp_path: Path, fake_openai: FakeOpenAI
) -> None:
    fake_openai.script(
        ToolCalls([("look_up", {"text": "opening hours"})]),
        "Open at nine.",
        ToolCalls([("write_note", {"text": "order paper"})]),
        "Not ordered.",
    )
    runtime = admin_runtime(
        tmp_path, model_base_url=fake_openai.base_url, tools_approve={"write_note": {"members": "ask"}}
    )
    notebook = Notebook().install(runtime)
    Lookup().install(runtime)
    console = ConsoleData(runtime)
    try:
        async with turn(runtime, "when do you open?", user_id="bob", display_name="Bob") as running:
            await running.reply()
        async with turn(
            runtime, "order paper", lane="telegram", user_id="77", display_name="Maya"
        ) as running:
            asked = await running.asked()
            assert (await console.decide(approval_id(asked), False))["decided"]
            await running.reply()
        async with httpx.AsyncClient(
            transport=httpx.ASGITransport(app=create_app(runtime)), base_url=BASE_URL
        ) as client:
            page = (await client.get("/admin/api/tool-calls", headers=BEARER)).json()
        first = await console.tool_calls(limit=1)
        older = await console.tool_calls(before=first["next"], limit=1)
    finally:
        await runtime.aclose()

    denied, looked_up = page["calls"]
    assert (denied["tool"], denied["summary"], denied["asked_by"], denied["lane"]) == (
        "write_note",
        "order paper",
        "Maya",
        "telegram",
    )
    assert denied["result"] == "not run" and denied["approval"]["state"] == "denied"
    assert denied["approval"]["decided_by"] == "operator" and denied["approval"]["decided_at"]
    assert (looked_up["tool"], looked_up["asked_by"], looked_up["result"]) == ("look_up", "Bob", "ok")
    assert looked_up["approval"] is None and looked_up["called_at"] <= denied["called_at"]
    assert page["next"] is None
    # A page at a time, newest first; the last page says there is nothing older.
    assert [call["tool"] for call in first["calls"]] == ["write_note"]
    assert [call["tool"] for call in older["calls"]] == ["look_up"] and older["next"] is not None
    assert await console.tool_calls(before=older["next"], limit=1) == {"calls": [], "next": None}
    assert notebook.written == []


def test_the_newest_tool_calls_are_read_through_an_index(tmp_path: Path) -> None:
    runtime = admin_runtime(tmp_path)
    try:
        query = "SELECT id FROM messages WHERE kind = 'tool_call' ORDER BY id DESC LIMIT 50"
        with runtime.database.connect() as connection:
            plan = " ".join(str(row[-1]) for row in connection.exec_driver_sql(f"EXPLAIN QUERY PLAN {query}"))
    finally:
        asyncio.run(runtime.aclose())
    assert "USING COVERING INDEX ix_messages_kind_id" in plan or "USING INDEX ix_messages_kind_id" in plan, (
        plan
    )
