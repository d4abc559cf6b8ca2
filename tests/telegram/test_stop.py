"""Stopping a reply on Telegram: /stop, the Stop button of a native draft, and in groups."""

from __future__ import annotations

from bot.runtime import Runtime
from channels.telegram.lane import TelegramLane
from tests.fakes.openai_server import FakeOpenAI, Hang
from tests.telegram.bot_api_server import FakeBotAPI, group_chat, message, private_text, user
from tests.telegram.conftest import LaneFactory

DEADLINE = 60.0
STOPPED = "Ada\nOnce upon a time\n\n[Stopped.]"


def assistant_statuses(runtime: Runtime) -> list[str]:
    [(session, _)] = runtime.stores.sessions.list_sessions()
    return [m.status for m in runtime.stores.messages.messages(session.id) if m.role == "assistant"]


async def test_stop_command_ends_the_streaming_reply_and_shows_it_stopped(
    lane: TelegramLane, runtime: Runtime, bot_api: FakeBotAPI, fake_openai: FakeOpenAI
) -> None:
    fake_openai.script(Hang(seconds=DEADLINE, after_text="Once upon a time"))
    bot_api.push(private_text(601, "tell me a long story"))
    # A stalled stream still shows what arrived.
    await bot_api.wait_for(lambda: any(d.shown.text == "Ada\nOnce upon a time" for d in bot_api.drafts(601)))

    bot_api.push(private_text(601, "/stop"))

    await bot_api.wait_for(lambda: sorted(bot_api.sent_texts(601)) == sorted([STOPPED, "Stopped."]))
    assert assistant_statuses(runtime) == ["interrupted"]
    # The reply and the confirmation may arrive in either order; the reply keeps its bold header.
    (stopped,) = [message for message in bot_api.messages(601) if message.shown.text == STOPPED]
    assert stopped.shown.spans("bold") == ["Ada"]

    bot_api.push(private_text(601, "a short one then"))
    await bot_api.wait_for(lambda: "Ada\nreply to: a short one then" in bot_api.sent_texts(601))
    assert assistant_statuses(runtime) == ["interrupted", "complete"]


async def test_stop_button_of_the_native_draft_stops_the_reply(
    lane: TelegramLane, runtime: Runtime, bot_api: FakeBotAPI, fake_openai: FakeOpenAI
) -> None:
    fake_openai.script(Hang(seconds=DEADLINE, after_text="Once upon a time"))
    bot_api.push(private_text(603, "tell me a long story", message_id=6030))
    await bot_api.wait_for(lambda: bot_api.drafts(603))
    assert bot_api.drafts(603)[0].can_stop

    bot_api.press_stop(603, 6030)

    await bot_api.wait_for(lambda: bot_api.sent_texts(603) == [STOPPED])
    assert assistant_statuses(runtime) == ["interrupted"]


async def test_stop_in_a_group_finishes_the_draft_in_place(
    start_lane: LaneFactory, runtime: Runtime, bot_api: FakeBotAPI, fake_openai: FakeOpenAI
) -> None:
    await start_lane()
    group, bob = group_chat(-100604), user(604, "Bob")
    fake_openai.script(Hang(seconds=DEADLINE, after_text="Once upon a time"))
    bot_api.push(message(group, bob, "@chorus_bot a story please"))
    await bot_api.wait_for(lambda: bot_api.sent_texts(-100604))

    bot_api.push(message(group, bob, "/stop"))

    await bot_api.wait_for(lambda: sorted(bot_api.sent_texts(-100604)) == sorted([STOPPED, "Stopped."]))
    assert bot_api.messages(-100604)[0].shown.text == STOPPED  # the draft itself, edited
    assert assistant_statuses(runtime) == ["interrupted"]


async def test_stop_when_nothing_runs(lane: TelegramLane, bot_api: FakeBotAPI) -> None:
    bot_api.push(private_text(602, "/stop"))

    await bot_api.wait_for(lambda: bot_api.sent_texts(602) == ["Nothing to stop."])
