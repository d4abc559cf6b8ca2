"""The window learned from the server (issue 41), against llama.cpp's real server at 1024 tokens.

Chorus runs here on the shipped config.yaml: `model.context_window` stays at its default
(128,000), far above the server's real window, as when an operator did not write it down.
A loopback proxy (tests/support/model_proxy.py) counts what the server refused, and either
lets Chorus ask the server its window (`/props`, `/v1/models`) or hides it (404), so the
window is learned the one way or the other: from the server's answer, or from its first
"request (N tokens) exceeds the available context size (M tokens)".
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from bot.storage.database import create_database_engine
from bot.storage.model_profiles import ModelProfileStore
from tests.support.llama_server import LlamaServer
from tests.support.model_proxy import ModelProxy
from tests.support.runtime import RuntimeFactory, inbound

# About 300 tokens each: four of them and a reply no longer fit the tests' window of 1024.
LONG_MESSAGE = " ".join(
    f"Note {number}: the ferry to the island leaves at seven and the market opens at nine."
    for number in range(20)
)
TURNS = 5


async def talk(
    runtimes: RuntimeFactory, tmp_path: Path, real_model: dict[str, Any], proxy: ModelProxy, **settings: Any
) -> list[str]:
    """The turns' reply kinds, on the real model through `proxy`, without the window in the
    settings: Chorus must find it out."""
    unlearned = {name: value for name, value in real_model.items() if name != "model_context_window"}
    runtime = runtimes(tmp_path, **{**unlearned, "model_base_url": proxy.api_url, **settings})
    kinds = []
    for number in range(TURNS):
        reply = await runtime.engine.respond(inbound(f"{LONG_MESSAGE} ({number})", user_id="grace"))
        await runtime.engine.drain()
        kinds.append(reply.kind)
    # Closed while the proxy still runs: the memory flush at close asks the model too.
    await runtime.aclose()
    return kinds


async def test_the_window_the_server_names_is_used_and_nothing_is_refused(
    tmp_path: Path, runtimes: RuntimeFactory, llama_server: LlamaServer, real_model: dict[str, Any]
) -> None:
    async with ModelProxy(llama_server.base_url) as proxy:
        kinds = await talk(runtimes, tmp_path, real_model, proxy, tools_enabled=False)

    assert kinds == ["assistant"] * TURNS
    assert not any(call.overflow for call in proxy.calls)


async def test_a_hidden_window_is_learned_from_the_first_overflow_error(
    tmp_path: Path, runtimes: RuntimeFactory, llama_server: LlamaServer, real_model: dict[str, Any]
) -> None:
    async with ModelProxy(llama_server.base_url, hide_window=True) as proxy:
        kinds = await talk(runtimes, tmp_path, real_model, proxy, tools_enabled=False)

    assert kinds == ["assistant"] * TURNS
    # The server's refusal named its window once; every request after it fitted.
    assert sum(call.overflow for call in proxy.calls) <= 1


@pytest.mark.parametrize("hide_window", [False, True], ids=["asked", "hidden"])
async def test_with_every_tool_offered_a_tight_window_sheds_and_every_turn_is_answered(
    tmp_path: Path,
    runtimes: RuntimeFactory,
    llama_server: LlamaServer,
    real_model: dict[str, Any],
    hide_window: bool,
) -> None:
    # Every built-in tool's schema together is larger than the whole window of 1024 tokens.
    async with ModelProxy(llama_server.base_url, hide_window=hide_window) as proxy:
        kinds = await talk(runtimes, tmp_path, real_model, proxy)

    assert kinds == ["assistant"] * TURNS
    assert sum(call.overflow for call in proxy.calls) <= (1 if hide_window else 0)


async def test_token_counts_are_calibrated_from_the_usage_the_server_reports(
    tmp_path: Path, runtimes: RuntimeFactory, llama_server: LlamaServer, real_model: dict[str, Any]
) -> None:
    async with ModelProxy(llama_server.base_url) as proxy:
        kinds = await talk(runtimes, tmp_path, real_model, proxy, tools_enabled=False)

    assert kinds == ["assistant"] * TURNS
    # The server's usage calibrated the count: SmolLM2's tokenizer counts more than tiktoken.
    profile = ModelProfileStore(create_database_engine(f"sqlite:///{tmp_path / 'chorus.db'}")).read("smollm2")
    assert profile.samples >= TURNS and profile.ratio is not None and profile.ratio > 1.0
    # Every chat request asks for the usage chunk, whose prompt_tokens calibrate the counts.
    bodies = [json.loads(call.body) for call in proxy.chat_calls()]
    assert bodies and all(body.get("stream_options") == {"include_usage": True} for body in bodies)
