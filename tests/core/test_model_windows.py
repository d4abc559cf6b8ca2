"""The model's window, learned from its server (issue 41): asked, taught by a refusal, calibrated.

Against a small model's server (tests/fakes/small_model_server.py) that counts with its own
tokenizer and refuses, as llama.cpp does, any prompt over its window of 2,048 tokens. The
settings name no window, as when an operator did not write one down; every built-in tool
is offered, their schemas alone about half the window.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from bot.turns.engine import Reply
from bot.windows import DEFAULT_WINDOW
from tests.fakes.openai_server import FakeOpenAI, refused_url
from tests.fakes.small_model_server import SmallModelServer
from tests.support.runtime import RuntimeFactory, inbound

WINDOW = 2048
# About 500 of the server's tokens: a handful of them and the tools no longer fit together.
LONG_MESSAGE = " ".join(
    f"Note {number}: the ferry leaves at seven, the market opens at nine, bring cash." for number in range(22)
)


def small_model(server: SmallModelServer, **overrides: Any) -> dict[str, Any]:
    return {"model_base_url": server.base_url, "model_name": "small", **overrides}


async def talk(runtime: Any, turns: int, user_id: str = "grace") -> list[Reply]:
    replies = []
    for number in range(turns):
        replies.append(await runtime.engine.respond(inbound(f"{LONG_MESSAGE} ({number})", user_id=user_id)))
        await runtime.engine.drain()
    return replies


async def test_the_window_the_server_states_is_kept_and_nothing_is_refused(
    runtimes: RuntimeFactory, tmp_path: Path
) -> None:
    async with SmallModelServer(WINDOW) as server:
        runtime = runtimes(tmp_path, **small_model(server))
        replies = await talk(runtime, 6)
        report = await runtime.engine.respond(inbound("/context", user_id="grace"))

    assert [reply.kind for reply in replies] == ["assistant"] * 6
    assert server.refusals == 0
    assert "2,048 tokens (stated by the server)" in report.text
    # The schemas that did not fit were left out, and the report says so.
    assert min(server.tools_offered) < max(server.tools_offered)
    assert "left out this turn" in report.text and "tools:" in report.text


async def test_a_hidden_window_is_learned_from_one_refusal_and_holds_after_a_restart(
    runtimes: RuntimeFactory, tmp_path: Path
) -> None:
    async with SmallModelServer(WINDOW, hide_window=True) as server:
        first = runtimes(tmp_path, **small_model(server))
        replies = await talk(first, 5)
        await first.aclose()
        restarted = runtimes(tmp_path, **small_model(server))
        replies += await talk(restarted, 3, user_id="ada")
        report = await restarted.engine.respond(inbound("/context", user_id="ada"))

    assert [reply.kind for reply in replies] == ["assistant"] * 8
    assert server.refusals == 1
    assert "2,048 tokens (learned)" in report.text
    assert restarted.stores.profiles.read("small").learned_window == WINDOW


async def test_a_window_the_server_overstates_is_corrected_by_its_first_refusal(
    runtimes: RuntimeFactory, tmp_path: Path
) -> None:
    async with SmallModelServer(WINDOW, stated_window=8192) as server:
        runtime = runtimes(tmp_path, **small_model(server))
        replies = await talk(runtime, 6)

    assert [reply.kind for reply in replies] == ["assistant"] * 6
    assert server.refusals == 1


async def test_counts_are_calibrated_from_the_usage_the_server_reports(
    runtimes: RuntimeFactory, tmp_path: Path
) -> None:
    async with SmallModelServer(WINDOW) as server:
        runtime = runtimes(tmp_path, **small_model(server, tools_enabled=False))
        await talk(runtime, 2)
        report = await runtime.engine.respond(inbound("/context", user_id="grace"))

    info = runtime.engine.assembler.windows.info("small")
    # The server counts about 1.3 of its tokens for each of Chorus's on this text.
    assert info.samples == 2 and 1.1 < info.ratio < 2.0
    assert f"counts calibrated ×{info.ratio:.2f} from 2 answers" in report.text


async def test_a_configured_window_wins_over_the_server(runtimes: RuntimeFactory, tmp_path: Path) -> None:
    async with SmallModelServer(WINDOW) as server:
        runtime = runtimes(tmp_path, **small_model(server, model_context_windows={"small": 1500}))
        report = await runtime.engine.respond(inbound("/context", user_id="grace"))
    assert "1,500 tokens (configured)" in report.text


async def test_a_message_larger_than_the_window_is_refused_with_its_size_and_kept(
    runtimes: RuntimeFactory, tmp_path: Path
) -> None:
    async with SmallModelServer(WINDOW) as server:
        runtime = runtimes(tmp_path, **small_model(server))
        huge = "The whole report follows. " + LONG_MESSAGE * 8
        reply = await runtime.engine.respond(inbound(huge, user_id="grace"))

    assert reply.kind == "error"
    assert "too long for this model" in reply.text and "2,048 tokens" in reply.text
    assert "Your message is saved" in reply.text
    stored = runtime.stores.messages.messages(reply.session_id)
    assert [(message.kind, message.content == huge) for message in stored[:1]] == [("message", True)]
    assert server.prompts == []  # never sent: it could not fit


async def test_two_processes_share_what_one_learned(
    database: dict[str, str], runtimes: RuntimeFactory, tmp_path: Path
) -> None:
    async with SmallModelServer(WINDOW, hide_window=True) as server:
        one = runtimes(tmp_path, **small_model(server, **database))
        other = runtimes(tmp_path, **small_model(server, **database))
        await talk(one, 5)
        assert server.refusals == 1
        replies = await talk(other, 5, user_id="ada")

    assert [reply.kind for reply in replies] == ["assistant"] * 5
    assert server.refusals == 1


async def test_the_demo_model_with_a_small_window_sheds_and_answers(
    runtimes: RuntimeFactory, tmp_path: Path
) -> None:
    runtime = runtimes(tmp_path, model_demo_window=1600)
    replies = await talk(runtime, 4)
    report = await runtime.engine.respond(inbound("/context", user_id="grace"))

    assert [reply.kind for reply in replies] == ["assistant"] * 4
    assert "1,600 tokens (stated by the server)" in report.text
    assert "left out this turn" in report.text


async def test_a_window_smaller_than_the_instructions_says_so_and_keeps_the_message(
    runtimes: RuntimeFactory, tmp_path: Path
) -> None:
    async with SmallModelServer(120) as server:
        runtime = runtimes(tmp_path, **small_model(server))
        reply = await runtime.engine.respond(inbound("hello", user_id="grace"))

    assert reply.kind == "error"
    assert "too small for this persona's instructions" in reply.text and "120 tokens" in reply.text
    assert runtime.stores.messages.messages(reply.session_id)[0].content == "hello"


async def test_a_smaller_fallback_is_learned_under_its_own_name_and_the_main_model_keeps_its_window(
    runtimes: RuntimeFactory, tmp_path: Path, fake_openai: FakeOpenAI
) -> None:
    async with SmallModelServer(WINDOW, hide_window=True) as server:
        # The main endpoint is down: every request is answered by the small fallback.
        down = runtimes(
            tmp_path,
            model_base_url=refused_url(),
            model_name="big",
            model_fallbacks=[{"base_url": server.base_url, "name": "small"}],
        )
        replies = await talk(down, 5)
        report = await down.engine.respond(inbound("/context", user_id="grace"))
        await down.aclose()

    assert [reply.kind for reply in replies] == ["assistant"] * 5
    # One refusal taught the fallback's window; later requests were fitted to it at once.
    assert server.refusals == 1
    assert down.stores.profiles.read("small").learned_window == WINDOW
    assert down.stores.profiles.read("big").learned_window is None
    assert "2,048 tokens (learned, small answering for big)" in report.text

    # Back on its own endpoint, the main model has its own window again.
    fake_openai.model = "big"
    back = runtimes(tmp_path, model_base_url=fake_openai.base_url, model_name="big")
    reply = await back.engine.respond(inbound("hello again", user_id="grace"))
    assert reply.kind == "assistant"
    assert back.engine.assembler.windows.info("big").window == DEFAULT_WINDOW
