"""While a tool runs, the Telegram draft shows one progress line per call, then the answer."""

from __future__ import annotations

import asyncio

from bot.runtime import Runtime
from tests.fakes.openai_server import FakeOpenAI, ToolCalls
from tests.support.tool_rows import left_between_rounds
from tests.support.tools import RAW_RESULT, HeldTool
from tests.telegram.bot_api_server import FakeBotAPI, group_chat, message, private_text, user
from tests.telegram.conftest import LaneFactory

GROUP = -100777
ANSWER = "Your dentist is on Tuesday."


def lookups(*queries: str) -> ToolCalls:
    return ToolCalls([("lookup", {"query": query}) for query in queries], text="Let me check. ")


async def test_private_draft_shows_a_line_per_call_then_the_answer(
    start_lane: LaneFactory, runtime: Runtime, bot_api: FakeBotAPI, fake_openai: FakeOpenAI
) -> None:
    held = HeldTool().install(runtime)
    await start_lane()
    fake_openai.script(lookups("dentist", "gym"), ANSWER)
    bot_api.push(private_text(801, "when is my dentist?", message_id=4801))

    def progress_shown() -> bool:
        return any("🔧 lookup: gym" in shown.text for draft in bot_api.drafts(801) for shown in draft.history)

    await bot_api.wait_for(progress_shown)
    [draft] = bot_api.drafts(801)
    assert draft.shown.text == "Ada\n🔧 lookup: dentist\n🔧 lookup: gym"
    held.release.set()

    await bot_api.wait_for(lambda: bot_api.sent_texts(801))
    assert bot_api.sent_texts(801) == ["Ada\n" + ANSWER]
    assert not draft.visible
    shown = [entry.text for entry in draft.history]
    # The round's own words ("Let me check.") are replaced, never mixed into the answer.
    assert all("Let me check" not in text and RAW_RESULT not in text for text in shown)


async def test_group_draft_message_is_edited_from_progress_lines_into_the_answer(
    start_lane: LaneFactory, runtime: Runtime, bot_api: FakeBotAPI, fake_openai: FakeOpenAI
) -> None:
    held = HeldTool().install(runtime)
    await start_lane()
    fake_openai.script(lookups("dentist"), ANSWER)
    bot_api.push(message(group_chat(GROUP), user(802, "Bob"), "@chorus_bot dentist?", message_id=90))

    await bot_api.wait_for(lambda: bot_api.sent_texts(GROUP) == ["Ada\n🔧 lookup: dentist ▌"])
    held.release.set()

    await bot_api.wait_for(lambda: bot_api.sent_texts(GROUP) == ["Ada\n" + ANSWER])
    [sent] = bot_api.calls_to("sendMessage")
    assert sent.params["reply_parameters"]["message_id"] == 90
    assert all(RAW_RESULT not in call.params["text"] for call in bot_api.calls_to("editMessageText"))


async def test_a_turn_recovered_between_rounds_shows_the_call_it_still_runs(
    start_lane: LaneFactory, runtime: Runtime, bot_api: FakeBotAPI, fake_openai: FakeOpenAI
) -> None:
    """A process died after storing one of two results; this one finishes the turn on Telegram."""
    held = HeldTool().install(runtime)
    lane = await start_lane()
    delivery = left_between_rounds(
        runtime.stores,
        lane="telegram",
        user_id="803",
        message_id="4803",
        question="dentist and gym?",
        tool="lookup",
        arguments=[{"query": "dentist"}, {"query": "gym"}],
        first_result="Tuesday",
    )
    fake_openai.script(ANSWER)

    resumed = asyncio.create_task(lane.resume(delivery, runtime.engine.resume(delivery)))

    def progress_shown() -> bool:
        return any(shown.text == "Ada\n🔧 lookup: gym" for d in bot_api.drafts(803) for shown in d.history)

    await bot_api.wait_for(progress_shown)
    held.release.set()
    await asyncio.wait_for(resumed, 60)
    assert held.asked == ["gym"]  # the call whose result was stored is not run again
    assert bot_api.sent_texts(803) == ["Ada\n" + ANSWER]
