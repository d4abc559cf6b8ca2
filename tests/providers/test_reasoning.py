"""Thinking in a model's answer: the three forms servers send it in, and a think never closed."""

from __future__ import annotations

import pytest

from bot.providers.base import ChatRequest, ModelEvent, ReasoningDelta, TextDelta
from bot.providers.openai import OpenAICompatibleProvider
from bot.providers.reasoning import ThinkSplitter
from tests.fakes.openai_server import FakeOpenAI, Reply
from tests.providers.conftest import ProviderFactory


def split(pieces: list[str]) -> tuple[str, str, bool]:
    """The answer text and the thinking of `pieces`, and whether a think was left open."""
    splitter = ThinkSplitter()
    deltas = [delta for piece in pieces for delta in splitter.feed(piece)] + splitter.close()
    text = "".join(d.text for d in deltas if isinstance(d, TextDelta))
    thinking = "".join(d.text for d in deltas if isinstance(d, ReasoningDelta))
    return text, thinking, splitter.unclosed


def test_a_leading_think_is_thinking_and_the_rest_the_answer() -> None:
    assert split(["<think>Sum them.</think>\n\nIt is 4."]) == ("It is 4.", "Sum them.", False)


@pytest.mark.parametrize("size", [1, 2, 3, 5, 7])
def test_tags_split_across_pieces_at_any_point(size: int) -> None:
    content = "<think>Two and two.</think>\nFour, <think>surely</think>I think."
    pieces = [content[at : at + size] for at in range(0, len(content), size)]

    assert split(pieces) == ("Four, I think.", "Two and two.surely", False)


def test_a_think_never_closed_is_thinking_to_the_end() -> None:
    assert split(["<think>Hmm, let", " me see… still", " thinking"]) == (
        "",
        "Hmm, let me see… still thinking",
        True,
    )


def test_text_that_only_looks_like_a_tag_start_is_kept_as_text() -> None:
    assert split(["a < b and x <th", "ing"]) == ("a < b and x <thing", "", False)
    assert split(["ends with <thi"]) == ("ends with <thi", "", False)


def chat() -> ChatRequest:
    return ChatRequest(messages=[{"role": "user", "content": "2+2?"}], model="test-model")


async def events_of(provider: OpenAICompatibleProvider) -> list[ModelEvent]:
    return [event async for event in provider.stream(chat())]


def parts(events: list[ModelEvent]) -> tuple[str, str]:
    text = "".join(e.text for e in events if isinstance(e, TextDelta))
    return text, "".join(e.text for e in events if isinstance(e, ReasoningDelta))


@pytest.mark.parametrize("field", ["reasoning_content", "reasoning"])
async def test_a_servers_reasoning_field_streams_as_thinking(
    fake_openai: FakeOpenAI, make_provider: ProviderFactory, field: str
) -> None:
    fake_openai.script(Reply("It is 4.", reasoning="Two and two make four.", reasoning_field=field))

    events = await events_of(make_provider())

    assert parts(events) == ("It is 4.", "Two and two make four.")
    # The thinking arrives first, as it streams, before any of the answer.
    assert isinstance(events[0], ReasoningDelta)


async def test_think_tags_in_the_content_stream_as_thinking(
    fake_openai: FakeOpenAI, make_provider: ProviderFactory
) -> None:
    fake_openai.script(Reply("", chunks=["<thi", "nk>Two and", " two.</th", "ink>\n\nIt is", " 4."]))

    assert parts(await events_of(make_provider())) == ("It is 4.", "Two and two.")


async def test_a_think_never_closed_ends_as_thinking_with_no_answer(
    fake_openai: FakeOpenAI, make_provider: ProviderFactory
) -> None:
    fake_openai.script(Reply("", chunks=["<think>Let me", " see… and see <", "/thin"]))

    assert parts(await events_of(make_provider())) == ("", "Let me see… and see </thin")


async def test_a_whole_completion_keeps_its_reasoning_apart(
    fake_openai: FakeOpenAI, make_provider: ProviderFactory
) -> None:
    fake_openai.ignores_stream = True
    fake_openai.script(Reply("It is 4.", reasoning="Two and two.", reasoning_field="reasoning"))

    assert parts(await events_of(make_provider())) == ("It is 4.", "Two and two.")
