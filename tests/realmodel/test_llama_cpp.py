"""Chorus against a real model server: llama.cpp on SmolLM2-135M, one thread, greedy sampling.

What the scripted stand-in cannot show: that llama.cpp's own stream reads as Chorus expects
it, on the web lane and in `chorus chat`, and that a `tool_calls` answer llama.cpp parsed out
of the model's `<tool_call>` block runs the tool and is stored as an exchange. The tiny model
only calls a tool when asked to repeat a call, so the tool test shows it the call to make.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from tests.support.runtime import RuntimeFactory, inbound
from tests.support.terminal import CTRL_D, PROMPT, ChatTerminal, chat_environment
from tests.web.conftest import ClientFactory
from tests.web.helpers import WebVisitor

# What the model is shown and asked to say back: llama.cpp parses it into a `tool_calls` answer.
REPEAT_A_CALL = (
    "Repeat exactly these three lines and nothing else:\n"
    '<tool_call>\n{"name": "context_inspect", "arguments": {}}\n</tool_call>'
)


async def test_a_reply_streams_from_llama_cpp_through_the_web_lane(
    make_client: ClientFactory, real_model: dict[str, Any]
) -> None:
    client = await make_client(**real_model, tools_enabled=False)
    visitor = await WebVisitor.start(client)

    events = await visitor.say("Hello! What is the capital of France?")

    deltas = [event.data["text"] for event in events if event.name == "delta"]
    done = events[-1]
    assert done.name == "done", events
    # The reply came in pieces as the model made them, and the stored reply is all of them.
    assert len(deltas) > 1 and "".join(deltas).strip()
    assert done.data["text"] == "".join(deltas)
    history = await visitor.history()
    assert [message["role"] for message in history["messages"]] == ["user", "assistant"]


def test_a_reply_streams_from_llama_cpp_in_the_terminal_chat(
    tmp_path: Path, real_model: dict[str, Any]
) -> None:
    environment = chat_environment(
        tmp_path,
        CHORUS_TOOLS_ENABLED="false",
        **{f"CHORUS_{name.upper()}": str(value) for name, value in real_model.items()},
    )
    terminal = ChatTerminal(environment)
    try:
        terminal.wait_for_prompt()
        terminal.type("Hello! What is the capital of France?\r")
        terminal.wait_for_answer()
        terminal.wait_for_prompt()
        terminal.type(CTRL_D)
        assert terminal.wait_for_exit() == 0
    finally:
        terminal.close()

    screen = terminal.screen
    reply = screen.split("Ada ─", 1)[1].split(PROMPT, 1)[0].strip("─ \n")
    assert reply and "[demo]" not in reply
    # The model answered: no error reply, no error logged. (At the end, memory distillation
    # warns that the tiny model's answer was not JSON; the offline rules distil instead.)
    assert "That turn failed" not in screen and " ERROR " not in screen, screen


async def test_a_tool_call_the_model_makes_is_run_and_stored_as_an_exchange(
    tmp_path: Path, runtimes: RuntimeFactory, real_model: dict[str, Any]
) -> None:
    # One small tool, so its schema and the exchange fit the tests' window of 1024 tokens.
    runtime = runtimes(tmp_path, **real_model, tools_allow=["context_inspect"], tools_max_steps=1)

    reply = await runtime.engine.respond(inbound(REPEAT_A_CALL))

    assert reply.kind == "assistant", reply
    assert reply.session_id is not None
    rows = await runtime.engine.db.run(runtime.stores.messages.recent_rows, reply.session_id, 20)
    kinds = [(row.role, row.kind) for row in rows]
    assert kinds == [
        ("user", "message"),
        ("assistant", "tool_call"),
        ("tool", "tool_result"),
        ("assistant", "message"),
    ], kinds
    call, result = rows[1], rows[2]
    assert [(stored.name, stored.arguments) for stored in call.tool_calls] == [("context_inspect", "{}")]
    assert result.tool_call_id == call.tool_calls[0].id and result.tool_name == "context_inspect"
    # The tool ran: its result is what context_inspect reports, not an error.
    assert result.status == "complete" and "token" in result.content.lower(), result.content


async def test_the_tokens_llama_cpp_reused_reach_context(
    tmp_path: Path, runtimes: RuntimeFactory, real_model: dict[str, Any]
) -> None:
    # This llama.cpp says it twice, in `timings.cache_n` and `prompt_tokens_details.cached_tokens`;
    # the stand-in's tests show each read alone (tests/providers/test_prompt_cache.py).
    runtime = runtimes(tmp_path, **real_model, tools_enabled=False, memory_enabled=False)
    engine = runtime.engine

    await engine.respond(inbound("Hello! What is the capital of France?"))
    reply = await engine.respond(inbound("And of Italy?"))
    context = await engine.respond(inbound("/context"))

    (stored,) = [
        m for m in runtime.stores.messages.messages(reply.session_id or "") if m.id == reply.message_id
    ]
    # The second turn repeats the first's system prompt and history: llama.cpp's slot kept them.
    assert stored.cached_tokens is not None and 0 < stored.cached_tokens < (stored.prompt_tokens or 0)
    share = stored.cached_tokens / (stored.prompt_tokens or 1)
    assert (
        f"Last turn: reused {stored.cached_tokens:,} of {stored.prompt_tokens:,} prompt tokens ({share:.0%})"
        in context.text
    )
    assert "Prompt prefix: the newest request kept the previous one's; 1 compared" in context.text
