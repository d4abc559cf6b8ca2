"""The stepped window keeps llama.cpp's prompt cache: most of each request is reused (issue 50).

Chorus on the real server (SmolLM2-135M, one slot, tests/support/llama_server.py) with the
default window (CONTEXT_COUNT 20, a step down to 10), through a loopback proxy that keeps the
server's answers; llama.cpp says in each answer's `timings` how many prompt tokens it took
from its cache (`cache_n`) and how many it evaluated (`prompt_n`). Over the 21 turns after
the window's first step, at least 85 % of the prompt tokens are reused. After-turn work
(compaction, memory distillation) is off here: on a one-slot server its requests take the
slot in between, which the after-turn requests' own prefix is about, not the window.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from bench.prefix_cache import timings
from tests.support.llama_server import LlamaServer
from tests.support.model_proxy import ModelProxy
from tests.support.runtime import RuntimeFactory, inbound

# The window (20 messages, two a turn) is first full after ten turns, and steps at the 11th.
FIRST_STEP = 11
TURNS = FIRST_STEP + 21
MIN_REUSED_SHARE = 0.85


async def test_most_of_each_prompt_is_reused_after_the_window_steps(
    tmp_path: Path, runtimes: RuntimeFactory, llama_server: LlamaServer, real_model: dict[str, Any]
) -> None:
    reused = evaluated = 0
    async with ModelProxy(llama_server.base_url) as proxy:
        runtime = runtimes(
            tmp_path,
            **{**real_model, "model_base_url": proxy.api_url, "model_reply_reserve_tokens": 24},
            tools_enabled=False,
            memory_enabled=False,
            context_compact_dropped_messages=1000,
        )
        starts = []
        for number in range(1, TURNS + 1):
            before = len(proxy.calls)
            reply = await runtime.engine.respond(
                inbound(
                    f"Day {number}: I walked along the river and counted {number} boats.", user_id="grace"
                )
            )
            await runtime.engine.drain()
            assert reply.kind == "assistant", reply.text
            (call,) = proxy.chat_calls(before)
            assert call.purpose is None
            history = json.loads(call.body)["messages"][1:]
            starts.append(history[0]["content"])
            if number > FIRST_STEP:
                seen = timings(bytes(call.response))
                reused += seen["cache_n"]
                evaluated += seen["prompt_n"]
        await runtime.aclose()

    share = reused / (reused + evaluated)
    assert share >= MIN_REUSED_SHARE, f"reused {reused} of {reused + evaluated} prompt tokens ({share:.2f})"
    # The window held for the first ten turns and stepped at the eleventh, then in steps only.
    assert len(set(starts[: FIRST_STEP - 1])) == 1 and starts[FIRST_STEP - 1] != starts[FIRST_STEP - 2]
    assert len(set(starts)) <= 1 + TURNS // 5
