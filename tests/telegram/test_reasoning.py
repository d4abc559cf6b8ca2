"""A reasoning model on Telegram: "thinking…" in the draft, the thinking folded after /reasoning on."""

from __future__ import annotations

import asyncio

from tests.fakes.openai_server import FakeOpenAI, Writes
from tests.telegram.bot_api_server import FakeBotAPI, private_text
from tests.telegram.conftest import LaneFactory

ANSWER = "It is 4."
THOUGHT = "Two and two make four."


def thinking_then_answer(fake_openai: FakeOpenAI, gate: asyncio.Event) -> Writes:
    return Writes(
        (fake_openai.reasoning_event(THOUGHT), gate, fake_openai.event(ANSWER), fake_openai.finish())
    )


async def test_the_draft_says_thinking_and_the_thinking_stays_hidden_by_default(
    start_lane: LaneFactory, bot_api: FakeBotAPI, fake_openai: FakeOpenAI
) -> None:
    await start_lane()
    gate = asyncio.Event()
    fake_openai.script(thinking_then_answer(fake_openai, gate))
    bot_api.push(private_text(811, "2+2?", message_id=4811))

    await bot_api.wait_for(
        lambda: any(draft.shown.text.endswith("💭 thinking…") for draft in bot_api.drafts(811))
    )
    gate.set()

    await bot_api.wait_for(lambda: bot_api.sent_texts(811))
    assert bot_api.sent_texts(811) == ["Ada\n" + ANSWER]
    assert all(THOUGHT not in call.params["text"] for call in bot_api.calls_to("sendMessage"))


async def test_reasoning_on_sends_the_thinking_as_an_expandable_blockquote(
    start_lane: LaneFactory, bot_api: FakeBotAPI, fake_openai: FakeOpenAI
) -> None:
    await start_lane()
    bot_api.push(private_text(812, "/reasoning on", message_id=4812))
    await bot_api.wait_for(lambda: any("Reasoning is on" in text for text in bot_api.sent_texts(812)))
    gate = asyncio.Event()
    gate.set()
    fake_openai.script(thinking_then_answer(fake_openai, gate))
    bot_api.push(private_text(812, "2+2?", message_id=4813))

    await bot_api.wait_for(lambda: any(ANSWER in text for text in bot_api.sent_texts(812)))
    [folded] = [call for call in bot_api.calls_to("sendMessage") if THOUGHT in call.params["text"]]
    assert folded.params["text"] == "💭 Thinking\n" + THOUGHT
    [quote] = folded.params["entities"]
    assert (quote["type"], quote["offset"], quote["length"]) == (
        "expandable_blockquote",
        12,
        len(THOUGHT),
    )  # 💭: 2 UTF-16 units
    assert bot_api.sent_texts(812)[-1] == "Ada\n" + ANSWER
