"""Replies on Telegram: who speaks, formatting as entities, drafts, 4096-unit parts, flood control."""

from __future__ import annotations

from bot.runtime import Runtime
from channels.telegram.lane import TelegramLane
from tests.fakes.openai_server import FakeOpenAI, Reply
from tests.telegram.bot_api_server import (
    FakeBotAPI,
    flood,
    group_chat,
    message,
    private_text,
    user,
)
from tests.telegram.conftest import EDIT_INTERVAL, LaneFactory
from tests.telegram.telegram_text import parse_legacy_markdown, utf16_len

GROUP = -100888


async def test_reply_names_the_persona_in_bold_and_keeps_it_out_of_the_history(
    lane: TelegramLane, bot_api: FakeBotAPI, fake_openai: FakeOpenAI
) -> None:
    bot_api.push(private_text(700, "/persona captain"))
    await bot_api.wait_for(lambda: bot_api.sent_texts(700))
    bot_api.push(private_text(700, "ahoy"))
    await bot_api.wait_for(lambda: len(bot_api.sent_texts(700)) == 2)
    bot_api.push(private_text(700, "and again"))
    await bot_api.wait_for(lambda: len(bot_api.sent_texts(700)) == 3)

    reply = bot_api.messages(700)[1]
    assert reply.shown.text == "Captain Reed\nreply to: ahoy"
    assert reply.shown.spans("bold") == ["Captain Reed"]
    # The switch answer is the engine's, not the persona's: no header.
    assert bot_api.sent_texts(700)[0].startswith("Switched to Captain Reed")
    history = fake_openai.requests[-1].messages
    assert {"role": "assistant", "content": "reply to: ahoy", "name": "captain"} in [
        {key: entry.get(key) for key in ("role", "content", "name")} for entry in history
    ]
    assert all("Captain Reed\n" not in str(entry.get("content")) for entry in history)


async def test_markdown_arrives_as_entities_not_as_legacy_markdown(
    lane: TelegramLane, bot_api: FakeBotAPI, fake_openai: FakeOpenAI
) -> None:
    text = (
        "Call `my_helper_function` from my_helper_function.py, see "
        "https://example.org/docs/snake_case_names and ask @chorus_test_bot. This is **bold**."
    )
    fake_openai.script(Reply(text, chunks=[text]))
    bot_api.push(private_text(701, "how?"))

    await bot_api.wait_for(lambda: bot_api.sent_texts(701))

    shown = bot_api.messages(701)[0].shown
    body = (
        "Call my_helper_function from my_helper_function.py, see "
        "https://example.org/docs/snake_case_names and ask @chorus_test_bot. This is bold."
    )
    assert shown.text == "Ada\n" + body
    assert shown.spans("code") == ["my_helper_function"]
    assert shown.spans("bold") == ["Ada", "bold"]
    assert shown.spans("italic") == []
    sent = bot_api.calls_to("sendMessage")[-1].params
    assert "parse_mode" not in sent and sent["entities"]
    # What legacy Markdown would have made of the same reply: the bugs this avoids.
    legacy = parse_legacy_markdown("my_helper_function and **bold**")
    assert legacy.text == "myhelperfunction and bold" and legacy.spans("bold") == []


async def test_code_block_and_emoji_keep_utf16_offsets(
    lane: TelegramLane, bot_api: FakeBotAPI, fake_openai: FakeOpenAI
) -> None:
    text = "Rocket 🚀 then **done** and\n\n```python\nprint('a_b')\n```"
    fake_openai.script(Reply(text, chunks=[text]))
    bot_api.push(private_text(702, "code?"))

    await bot_api.wait_for(lambda: bot_api.sent_texts(702))

    shown = bot_api.messages(702)[0].shown
    assert shown.spans("bold") == ["Ada", "done"]
    assert shown.spans("pre") == ["print('a_b')"]
    pre = next(entity for entity in shown.entities if entity["type"] == "pre")
    assert pre["language"] == "python"


async def test_long_reply_is_split_with_valid_entities_in_every_part(
    lane: TelegramLane, bot_api: FakeBotAPI, fake_openai: FakeOpenAI
) -> None:
    code = "\n".join(f"print('line_{index} 🚀')" for index in range(400))
    text = "Here is **the script**:\n\n```python\n" + code + "\n```\n\nRun it with `python`."
    fake_openai.script(text)
    bot_api.push(private_text(703, "write a long script"))

    await bot_api.wait_for(lambda: bot_api.sent_texts(703)[-1:] and "Run it" in bot_api.sent_texts(703)[-1])

    parts = bot_api.messages(703)
    assert len(parts) >= 3
    # The stand-in refuses any entity outside its text, so every part arriving proves them valid.
    assert all(utf16_len(part.shown.text) <= 4096 for part in parts)
    assert parts[0].shown.text.startswith("Ada\nHere is the script:")
    assert all(any(entity["type"] == "pre" for entity in part.shown.entities) for part in parts[:-1])
    joined = "\n".join(part.shown.text for part in parts)
    assert all(f"print('line_{index} 🚀')" in joined for index in range(400))
    assert parts[-1].shown.spans("code") == ["python"]


async def test_private_reply_streams_as_a_native_draft_then_one_message(
    lane: TelegramLane, bot_api: FakeBotAPI, fake_openai: FakeOpenAI
) -> None:
    words = [f"word{index} " for index in range(40)]
    fake_openai.script(Reply("".join(words), chunks=words, delay=0.03))
    bot_api.push(private_text(704, "tell me a story", message_id=4704))

    await bot_api.wait_for(lambda: bot_api.sent_texts(704))

    drafts = bot_api.calls_to("sendMessageDraft")
    assert drafts, "the reply streamed as a draft"
    assert {call.params["draft_id"] for call in drafts} == {"4704"}
    assert all(call.params["can_stop"] == "true" for call in drafts)
    [draft] = bot_api.drafts(704)
    # The first text shown is a phrase, not a single token.
    assert len(draft.history[0].text) >= len("Ada\n") + 40
    assert draft.history[0].spans("bold") == ["Ada"]
    # Throttled: about one update per interval, not one per word.
    assert len(drafts) <= len(words) // 3
    moments = [call.at for call in drafts]
    assert all(
        later - earlier >= EDIT_INTERVAL * 0.9 for earlier, later in zip(moments, moments[1:], strict=False)
    )
    assert len(bot_api.calls_to("sendMessage")) == 1
    assert not bot_api.calls_to("editMessageText")
    assert bot_api.sent_texts(704) == ["Ada\n" + "".join(words).strip()]
    assert not draft.visible  # the final message replaced the draft


async def test_draft_under_repeated_flood_control_still_delivers_the_reply(
    lane: TelegramLane, bot_api: FakeBotAPI, fake_openai: FakeOpenAI
) -> None:
    words = [f"step{index} " for index in range(30)]
    fake_openai.script(Reply("".join(words), chunks=words, delay=0.05))
    for _ in range(10):
        bot_api.fail_next("sendMessageDraft", flood(1))
    bot_api.push(private_text(705, "go"))

    await bot_api.wait_for(lambda: bot_api.sent_texts(705))

    assert bot_api.sent_texts(705) == ["Ada\n" + "".join(words).strip()]
    refused = bot_api.calls_to("sendMessageDraft")
    # Each 429 asked for a second: the next draft call waited it out instead of hammering.
    gaps = [later.at - earlier.at for earlier, later in zip(refused, refused[1:], strict=False)]
    assert gaps and min(gaps) >= 0.95


async def test_group_draft_is_edited_then_finished_in_place_with_a_quote(
    start_lane: LaneFactory, bot_api: FakeBotAPI, fake_openai: FakeOpenAI
) -> None:
    await start_lane()
    words = [f"part{index} " for index in range(40)]
    fake_openai.script(Reply("".join(words), chunks=words, delay=0.04))
    bot_api.push(message(group_chat(GROUP), user(711, "Bob"), "@chorus_bot explain", message_id=77))

    await bot_api.wait_for(lambda: bot_api.sent_texts(GROUP) == ["Ada\n" + "".join(words).strip()])

    sends, edits = bot_api.calls_to("sendMessage"), bot_api.calls_to("editMessageText")
    assert len(sends) == 1 and sends[0].params["reply_parameters"]["message_id"] == 77
    assert sends[0].params["text"].endswith(" ▌") and len(sends[0].params["text"]) >= 40
    assert edits and "sendMessageDraft" not in {call.method for call in bot_api.calls}


async def test_deleted_group_draft_does_not_lose_the_reply(
    start_lane: LaneFactory, bot_api: FakeBotAPI, fake_openai: FakeOpenAI
) -> None:
    await start_lane()
    words = [f"bit{index} " for index in range(60)]
    fake_openai.script(Reply("".join(words), chunks=words, delay=0.05))
    bot_api.push(message(group_chat(GROUP), user(712, "Bob"), "@chorus_bot go on", message_id=78))
    await bot_api.wait_for(lambda: bot_api.calls_to("sendMessage"))
    draft_id = bot_api.messages(GROUP)[0].message_id

    bot_api.delete_message(GROUP, draft_id)

    final = "Ada\n" + "".join(words).strip()
    await bot_api.wait_for(lambda: bot_api.sent_texts(GROUP) == [final])
    assert bot_api.messages(GROUP)[0].message_id != draft_id


async def test_group_reply_stays_under_telegrams_group_limit(
    start_lane: LaneFactory, runtime: Runtime, bot_api: FakeBotAPI, fake_openai: FakeOpenAI
) -> None:
    # Fast edits on purpose: only the per-group budget keeps the lane under 20 a minute.
    lane = await start_lane()
    lane.delivery.group_edit_interval = EDIT_INTERVAL
    words = [f"w{index} " for index in range(200)]
    fake_openai.script(Reply("".join(words), chunks=words, delay=0.03))
    bot_api.push(message(group_chat(GROUP), user(713, "Bob"), "@chorus_bot long one", message_id=79))

    await bot_api.wait_for(lambda: bot_api.sent_texts(GROUP) == ["Ada\n" + "".join(words).strip()])

    to_group = [
        call
        for call in bot_api.calls
        if call.method in ("sendMessage", "editMessageText") and call.params["chat_id"] == str(GROUP)
    ]
    assert len(to_group) <= 20


async def test_flood_control_on_the_final_edit_is_waited_out(
    start_lane: LaneFactory, bot_api: FakeBotAPI, fake_openai: FakeOpenAI
) -> None:
    await start_lane()
    text = "slow and steady wins the race, every single time, they say"
    fake_openai.script(Reply(text, chunks=[text]))
    bot_api.fail_next("sendMessage", flood(1))
    bot_api.push(message(group_chat(GROUP), user(714, "Bob"), "@chorus_bot race?", message_id=80))

    await bot_api.wait_for(lambda: bot_api.sent_texts(GROUP) == ["Ada\n" + text])

    refused, retried = bot_api.calls_to("sendMessage")
    assert retried.at - refused.at >= 1.0
