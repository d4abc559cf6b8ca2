"""The numbers in a model server's "the prompt does not fit" error: its window and the request's size.

Each server words it its own way, and only the numbers teach anything: the window is
what every later request is fitted to (`bot.windows`), and the request's size in the
server's own tokens calibrates Chorus's count. Wordings, as the servers send them:

- llama.cpp: "request (2201 tokens) exceeds the available context size (2048 tokens), try
  increasing it" — its error object also carries `n_prompt_tokens` and `n_ctx`.
- OpenAI, vLLM and OpenRouter: "This model's maximum context length is 8192 tokens. However,
  you requested 9000 tokens (8000 in the messages, 1000 in the completion)." (OpenAI also
  "…However, your messages resulted in 9000 tokens"; newer vLLM "…and your request has
  1500 input tokens".)
- vLLM's prompt check: "The prompt (N tokens) is longer than the maximum model length of M".
- Anthropic: "prompt is too long: 208310 tokens > 200000 maximum".
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any

from bot.errors import OverflowNumbers

_NUMBER = r"(\d[\d,]*)"

# Each pattern names its window and request groups; the first that matches wins.
_WORDINGS = (
    re.compile(rf"request \({_NUMBER} tokens\) exceeds the available context size \({_NUMBER} tokens\)"),
    re.compile(
        rf"maximum context length is {_NUMBER} tokens.*?"
        rf"(?:you requested (?:about )?{_NUMBER} tokens(?: \({_NUMBER} in the messages)?"
        rf"|resulted in {_NUMBER} tokens|has {_NUMBER} input tokens)",
        re.DOTALL,
    ),
    re.compile(rf"prompt \({_NUMBER} tokens\) is longer than the maximum model length of {_NUMBER}"),
    re.compile(rf"prompt is too long: {_NUMBER} tokens > {_NUMBER} maximum"),
    # Last: a window named without the request's size.
    re.compile(rf"maximum context length is {_NUMBER}"),
    re.compile(rf"context (?:size|length|window) (?:of|is) {_NUMBER}"),
)


def overflow_numbers(message: str, details: Mapping[str, Any] | None = None) -> OverflowNumbers:
    """The window and the request's prompt size an overflow error names; None for what it does not.

    `details` is the error object as parsed (llama.cpp puts both numbers in fields of it).
    For OpenAI's wording the prompt is "in the messages" when it says so, since the
    requested total includes the reply's allowance.
    """
    if details is not None:
        window, requested = _integer(details.get("n_ctx")), _integer(details.get("n_prompt_tokens"))
        if window is not None:
            return OverflowNumbers(window=window, requested=requested)
    text = " ".join(message.split())
    for pattern in _WORDINGS:
        match = pattern.search(text)
        if match is None:
            continue
        found = [_integer(group) for group in match.groups()]
        if pattern is _WORDINGS[0]:
            return OverflowNumbers(window=found[1], requested=found[0])
        if pattern is _WORDINGS[1]:
            requested_total, in_messages, resulted, input_tokens = found[1:]
            prompt = in_messages or resulted or input_tokens or requested_total
            return OverflowNumbers(window=found[0], requested=prompt)
        if pattern in (_WORDINGS[2], _WORDINGS[3]):
            first, second = found
            prompt, window = (first, second)
            return OverflowNumbers(window=window, requested=prompt)
        return OverflowNumbers(window=found[0])
    return OverflowNumbers()


def _integer(value: object) -> int | None:
    if isinstance(value, bool):
        return None
    if isinstance(value, int):
        return value if value > 0 else None
    if isinstance(value, str):
        digits = value.replace(",", "")
        return int(digits) if digits.isdigit() and int(digits) > 0 else None
    return None
