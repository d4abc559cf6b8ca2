"""The numbers in each server's "the prompt does not fit" error (bot/providers/overflow.py)."""

from __future__ import annotations

import pytest

from bot.errors import OverflowNumbers
from bot.providers.overflow import overflow_numbers


@pytest.mark.parametrize(
    ("message", "window", "requested"),
    [
        (  # llama.cpp's server
            "request (2201 tokens) exceeds the available context size (2048 tokens), try increasing it",
            2048,
            2201,
        ),
        (  # OpenAI, the prompt and the reply's allowance named apart
            "This model's maximum context length is 8192 tokens. However, you requested 9000 tokens "
            "(8000 in the messages, 1000 in the completion). Please reduce the length of the messages.",
            8192,
            8000,
        ),
        (  # OpenAI, older wording
            "This model's maximum context length is 4097 tokens. However, your messages resulted in "
            "4,500 tokens. Please reduce the length of the messages.",
            4097,
            4500,
        ),
        (  # vLLM's newer wording
            "This model's maximum context length is 32768 tokens. However, your request has 40000 "
            "input tokens. Please reduce the length of the input messages.",
            32768,
            40000,
        ),
        ("The prompt (5000 tokens) is longer than the maximum model length of 4096.", 4096, 5000),
        ("prompt is too long: 208310 tokens > 200000 maximum", 200000, 208310),  # Anthropic
        ("This model's maximum context length is 16385 tokens.", 16385, None),
    ],
)
def test_each_servers_wording_gives_its_window_and_the_prompts_size(
    message: str, window: int, requested: int | None
) -> None:
    assert overflow_numbers(message) == OverflowNumbers(window=window, requested=requested)


def test_llama_cpps_error_fields_win_over_its_words() -> None:
    details = {"type": "exceed_context_size_error", "n_prompt_tokens": 3031, "n_ctx": 2048}
    assert overflow_numbers("too long", details) == OverflowNumbers(window=2048, requested=3031)


@pytest.mark.parametrize(
    "message",
    [
        "context_length_exceeded",
        "Input is too long.",
        "request exceeds the available context size (-5 tokens)",
    ],
)
def test_an_error_without_usable_numbers_names_nothing(message: str) -> None:
    assert overflow_numbers(message) == OverflowNumbers()
