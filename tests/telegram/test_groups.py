"""Groups and forum topics: when the bot answers, what it records, where sessions split."""

from __future__ import annotations

from bot.runtime import Runtime
from tests.fakes.openai_server import FakeOpenAI, message_text
from tests.telegram.bot_api_server import BOT_ID, BOT_USERNAME, FakeBotAPI, group_chat, message, user
from tests.telegram.conftest import LaneFactory

GROUP = -100777
BOB = user(601, "Bob", "Stone")
CAROL = user(602, "Carol")


def stored(runtime: Runtime, message_id: int, chat: int = GROUP) -> str | None:
    found = runtime.stores.messages.find_platform_message("telegram", str(chat), str(message_id))
    return found.content if found is not None else None


async def test_group_message_without_mention_is_recorded_not_answered(
    start_lane: LaneFactory, runtime: Runtime, bot_api: FakeBotAPI, fake_openai: FakeOpenAI
) -> None:
    await start_lane()
    bot_api.push(message(group_chat(GROUP), CAROL, "the meeting moved to 3pm", message_id=11))
    await bot_api.wait_for(lambda: stored(runtime, 11))

    bot_api.push(message(group_chat(GROUP), BOB, f"@{BOT_USERNAME} when is it?", message_id=12))
    await bot_api.wait_for(lambda: bot_api.sent_texts(GROUP))

    assert len(fake_openai.requests) == 1
    users = [m for m in fake_openai.requests[0].messages if m["role"] == "user"]
    # Context from the unaddressed message, and display names visible to the model.
    assert [message_text(m) for m in users] == [
        "Carol: the meeting moved to 3pm",
        f"Bob Stone: @{BOT_USERNAME} when is it?",
    ]
    reply = bot_api.calls_to("sendMessage")[0].params
    assert reply["reply_parameters"]["message_id"] == 12


async def test_reply_to_the_bot_and_commands_count_as_addressed(
    start_lane: LaneFactory, runtime: Runtime, bot_api: FakeBotAPI
) -> None:
    await start_lane()
    bot_message = {
        "message_id": 900,
        "date": 0,
        "chat": group_chat(GROUP),
        "from": {"id": BOT_ID, "is_bot": True, "first_name": "Chorus", "username": BOT_USERNAME},
        "text": "earlier answer",
    }
    bot_api.push(message(group_chat(GROUP), BOB, "tell me more", reply_to_message=bot_message))
    await bot_api.wait_for(lambda: len(bot_api.sent_texts(GROUP)) == 1)

    bot_api.push(message(group_chat(GROUP), BOB, "/help@other_bot", message_id=21))
    bot_api.push(message(group_chat(GROUP), BOB, f"/status@{BOT_USERNAME}", message_id=22))
    await bot_api.wait_for(lambda: len(bot_api.sent_texts(GROUP)) == 2)

    assert bot_api.sent_texts(GROUP)[1].startswith("Persona: Ada (ada)")
    assert stored(runtime, 21) == "/help@other_bot"  # someone else's command: context only
    assert len(bot_api.calls_to("sendMessage")) == 2


async def test_activation_always_answers_every_group_message(
    start_lane: LaneFactory, bot_api: FakeBotAPI
) -> None:
    await start_lane(activation="always")
    bot_api.push(message(group_chat(GROUP), CAROL, "anyone there?"))

    await bot_api.wait_for(lambda: bot_api.sent_texts(GROUP) == ["Ada\nreply to: Carol: anyone there?"])


async def test_each_forum_topic_is_its_own_session(
    start_lane: LaneFactory, runtime: Runtime, bot_api: FakeBotAPI, fake_openai: FakeOpenAI
) -> None:
    await start_lane(activation="always")
    forum = group_chat(GROUP, forum=True)
    for message_id, topic, text in ((41, 7, "topic one secret"), (42, 8, "topic two question")):
        bot_api.push(
            message(forum, BOB, text, message_id=message_id, message_thread_id=topic, is_topic_message=True)
        )
        await bot_api.wait_for(lambda count=message_id - 40: len(bot_api.sent_texts(GROUP)) == count)

    assert [c.params["message_thread_id"] for c in bot_api.calls_to("sendMessage")] == ["7", "8"]
    history = [m for m in fake_openai.requests[1].messages if m["role"] != "system"]
    # Recall follows the newest message; the history itself holds only topic two.
    assert [message_text(m).split("\n\n## Recalled")[0] for m in history] == ["Bob Stone: topic two question"]
    one = runtime.stores.messages.find_platform_message("telegram", str(GROUP), "41")
    two = runtime.stores.messages.find_platform_message("telegram", str(GROUP), "42")
    assert one is not None and two is not None and one.session_id != two.session_id


async def test_allow_lists_ignore_other_users_and_chats(
    start_lane: LaneFactory, runtime: Runtime, bot_api: FakeBotAPI
) -> None:
    await start_lane(activation="always", allowed_users=["bob"], allowed_chats=[str(GROUP)])
    bot_api.push(message(group_chat(GROUP), CAROL, "not on the list", message_id=31))
    bot_api.push(message(group_chat(-100999), BOB, "wrong group", message_id=32))
    bot_api.push(message(group_chat(GROUP), BOB, "allowed", message_id=33))

    await bot_api.wait_for(lambda: bot_api.sent_texts() == ["Ada\nreply to: Bob Stone: allowed"])

    assert stored(runtime, 31) is None
    assert stored(runtime, 32, chat=-100999) is None


async def test_unaddressed_group_messages_reach_long_term_memory(
    start_lane: LaneFactory, runtime: Runtime, bot_api: FakeBotAPI
) -> None:
    from bot.storage.memory_store import MemoryStore
    from bot.storage.owners import Owner

    await start_lane()
    facts = [f"I adopted a rescue greyhound named Comet{n} from the shelter." for n in range(20)]
    for n, text in enumerate(facts):  # memory.steps_threshold: twenty stored messages
        bot_api.push(message(group_chat(GROUP), CAROL if n % 2 else BOB, text, message_id=300 + n))
    memory = MemoryStore(runtime.database)
    owner = Owner("group", f"telegram:{GROUP}")
    items = await bot_api.wait_for(lambda: len(memory.all_items(owner)) >= 20 and memory.all_items(owner), 60)
    assert not bot_api.sent_texts(GROUP)  # recorded, never answered
    assert {item.content.split(":")[0] for item in items} == {"Bob Stone", "Carol"}
    assert {item.source_seq for item in items} == set(range(1, 21))
