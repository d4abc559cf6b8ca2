"""Replies on Telegram: throttled draft edits, 4096-character parts, formatting, flood control."""

from __future__ import annotations

from channels.telegram.lane import TelegramLane
from tests.fakes.openai_server import FakeOpenAI, Reply
from tests.telegram.bot_api_server import FakeBotAPI, flood, private_text
from tests.telegram.conftest import EDIT_INTERVAL


async def test_draft_is_edited_at_a_throttled_rate_then_finished(
    lane: TelegramLane, bot_api: FakeBotAPI, fake_openai: FakeOpenAI
) -> None:
    words = [f"word{index} " for index in range(30)]
    fake_openai.script(Reply("".join(words), chunks=words, delay=0.03))
    bot_api.push(private_text(701, "tell me a story"))

    final = "".join(words).strip()
    await bot_api.wait_for(lambda: bot_api.sent_texts(701) == ["".join(words)], timeout=8)

    sends, edits = bot_api.calls_to("sendMessage"), bot_api.calls_to("editMessageText")
    assert len(sends) == 1 and sends[0].params["text"].endswith(" ▌")
    assert len(edits) >= 2
    # ~0.9 s of streaming at one edit per 0.2 s: a handful of edits, not one per word.
    assert len(edits) <= 8
    moments = [sends[0].at] + [edit.at for edit in edits[:-1]]
    gaps = [later - earlier for earlier, later in zip(moments, moments[1:], strict=False)]
    assert min(gaps) >= EDIT_INTERVAL * 0.9
    assert edits[-1].params["text"].strip() == final
    assert edits[-1].params["parse_mode"] == "Markdown"
    assert all("parse_mode" not in edit.params for edit in edits[:-1])


async def test_long_reply_is_split_without_breaking_code_fences(
    lane: TelegramLane, bot_api: FakeBotAPI, fake_openai: FakeOpenAI
) -> None:
    code = "\n".join(f"print('line {index}')" for index in range(500))
    text = "Here is the script:\n\n```python\n" + code + "\n```\n\nRun it with python."
    assert len(text) > 2 * 4096
    fake_openai.script(text)
    bot_api.push(private_text(702, "write a long script"))

    await bot_api.wait_for(lambda: len(bot_api.sent_texts(702)) >= 3, timeout=8)
    await bot_api.wait_for(lambda: bot_api.sent_texts(702)[-1].endswith("Run it with python."))

    parts = bot_api.sent_texts(702)
    assert all(len(part) <= 4096 for part in parts)
    assert all(part.count("```") % 2 == 0 for part in parts)
    assert parts[1].startswith("```python\n")
    joined = "\n".join(parts)
    assert all(f"print('line {index}')" in joined for index in range(500))
    # The first part replaced the draft instead of arriving as another message.
    assert len(bot_api.calls_to("sendMessage")) == len(parts)
    assert not any(part.endswith(" ▌") for part in parts)


async def test_formatting_telegram_rejects_is_resent_as_plain_text(
    lane: TelegramLane, bot_api: FakeBotAPI, fake_openai: FakeOpenAI
) -> None:
    text = "Use snake_case names * and keep them short"
    fake_openai.script(Reply(text, chunks=[text]))
    bot_api.push(private_text(703, "naming tips?"))

    await bot_api.wait_for(lambda: bot_api.sent_texts(703) == [text])

    edits = bot_api.calls_to("editMessageText")
    assert [edit.params.get("parse_mode") for edit in edits] == ["Markdown", None]
    assert edits[-1].params["text"] == text


async def test_well_formed_markdown_is_sent_formatted(
    lane: TelegramLane, bot_api: FakeBotAPI, fake_openai: FakeOpenAI
) -> None:
    text = "Use *bold* and `code`"
    fake_openai.script(Reply(text, chunks=[text]))
    bot_api.push(private_text(704, "format please"))

    await bot_api.wait_for(lambda: bot_api.sent_texts(704) == [text])

    assert [edit.params.get("parse_mode") for edit in bot_api.calls_to("editMessageText")] == ["Markdown"]


async def test_flood_control_on_edit_is_waited_out(
    lane: TelegramLane, bot_api: FakeBotAPI, fake_openai: FakeOpenAI
) -> None:
    fake_openai.script(Reply("slow and steady wins", chunks=["slow and steady wins"]))
    bot_api.fail_next("editMessageText", flood(1))
    bot_api.push(private_text(705, "race?"))

    await bot_api.wait_for(lambda: bot_api.sent_texts(705) == ["slow and steady wins"], timeout=5)

    refused, retried = bot_api.calls_to("editMessageText")
    assert retried.at - refused.at >= 1.0
    assert retried.params["text"] == "slow and steady wins"
