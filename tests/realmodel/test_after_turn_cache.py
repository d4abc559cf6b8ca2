"""After-turn requests share the conversation's prefix on llama.cpp's real server (issue 50).

One slot: whatever the server served last is what it has cached. A memory distillation
with a system prompt of its own would evict the conversation and evaluate everything
again; starting with the turn's own request and its reply, the server reuses that prompt
(`timings.cache_n`) and evaluates only the instruction. A loopback proxy
(tests/support/model_proxy.py) keeps each request and what the server answered.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import pytest

from bench.prefix_cache import timings
from bot.memory.distill import MEMORY_PURPOSE
from tests.support.llama_server import LlamaServer, server_available
from tests.support.model_proxy import ModelProxy
from tests.support.peers import REAL_MODEL
from tests.support.runtime import RuntimeFactory, inbound

# Room for a conversation of a few turns and a distillation after it.
WINDOW = 4096
MESSAGES = (
    "Hi, I am Grace. I moved to Leeds last spring and I work as a nurse at the city hospital.",
    "We decided that the team dinner is on Friday at seven, at the Italian place near the station.",
    "My sister Ines lives in Porto; she visits every August and we always take the ferry together.",
    "I prefer tea to coffee, and I never eat meat. Please remember that for the dinner booking.",
)
# The share of the conversation's previous prompt the distillation must find cached.
CACHED_SHARE = 0.8


@pytest.fixture(scope="module")
def wide_server() -> Iterator[LlamaServer]:
    if not server_available():
        REAL_MODEL.skip()
    with LlamaServer(n_ctx=WINDOW) as server:
        yield server


async def test_a_memory_distillation_is_served_from_the_conversations_cache(
    runtimes: RuntimeFactory, tmp_path: Path, wide_server: LlamaServer
) -> None:
    async with ModelProxy(wide_server.base_url) as proxy:
        runtime = runtimes(
            tmp_path,
            model_base_url=proxy.api_url,
            model_name="smollm2",
            model_context_window=WINDOW,
            model_reply_reserve_tokens=48,
            memory_enabled=True,
            memory_turns_threshold=2,
            memory_idle_seconds=0,
        )
        for text in MESSAGES:
            await runtime.engine.respond(inbound(text, user_id="grace"))
            await runtime.engine.drain()
        calls = [call for call in proxy.chat_calls() if call.status == 200]
        await runtime.aclose()

    checked = 0
    for previous, call in zip(calls, calls[1:], strict=False):
        if call.purpose != MEMORY_PURPOSE or previous.purpose is not None:
            continue
        turn, distillation = timings(bytes(previous.response)), timings(bytes(call.response))
        prompt = turn["cache_n"] + turn["prompt_n"]
        assert distillation["cache_n"] >= CACHED_SHARE * prompt, (distillation, turn)
        # Because it starts with the turn's messages: the server has them, and its reply.
        asked = json.loads(previous.body)["messages"]
        assert json.loads(call.body)["messages"][: len(asked)] == asked
        checked += 1
    # Two turns per trigger: a distillation after the second and the fourth.
    assert checked == 2
