from __future__ import annotations

import logging
import socket
from collections.abc import Iterator

import pytest
import tiktoken

from transcript import count_message_tokens, count_tokens, truncate_to_tokens
from transcript import tokens as tokens_module


@pytest.fixture
def fresh_encoding() -> Iterator[None]:
    """Load the encoding anew in the test, and leave a clean cache behind."""
    tokens_module.encoding.cache_clear()
    yield
    tokens_module.encoding.cache_clear()


@pytest.fixture
def no_encoding(fresh_encoding: None, monkeypatch: pytest.MonkeyPatch) -> None:
    def unavailable(name: str) -> tiktoken.Encoding:
        raise ValueError(f"Unknown encoding {name}")

    monkeypatch.setattr(tiktoken, "get_encoding", unavailable)


def test_counts_with_cl100k() -> None:
    assert count_tokens("hello world") == 2
    assert count_tokens("") == 0


def test_encoding_loads_without_network(fresh_encoding: None, monkeypatch: pytest.MonkeyPatch) -> None:
    def refuse(*args: object) -> None:
        raise AssertionError("network used")

    monkeypatch.setattr(socket.socket, "connect", refuse)
    assert tokens_module.encoding() is not None
    assert count_tokens("hello world") == 2


def test_special_token_text_is_counted_not_rejected() -> None:
    assert count_tokens("<|endoftext|>") > 1


def test_message_tokens_include_overhead_name_and_images() -> None:
    assert count_message_tokens({"role": "user", "content": "hello world"}) == 6
    assert count_message_tokens({"role": "user", "content": "hello world", "name": "Alice"}) == 7
    parts = [
        {"type": "text", "text": "hello world"},
        {"type": "image_url", "image_url": {"url": "data:image/png;base64,AAAA"}},
    ]
    assert count_message_tokens({"role": "user", "content": parts}) == 4 + 2 + 85


def test_truncate_keeps_a_beginning_within_the_tokens() -> None:
    text = "one two three four five six"
    assert truncate_to_tokens(text, 3) == "one two three"
    assert truncate_to_tokens(text, 100) == text
    assert truncate_to_tokens(text, 0) == ""


def test_truncate_long_text_matches_full_tokenisation() -> None:
    text = "The quick brown fox jumps over the lazy dog. " * 2000
    cut = truncate_to_tokens(text, 1500)
    assert text.startswith(cut)
    assert count_tokens(cut) == 1500


def test_truncate_never_splits_a_character() -> None:
    text = "张三李四王五赵六" * 20
    for limit in range(1, 12):
        cut = truncate_to_tokens(text, limit)
        assert text.startswith(cut)
        assert "\ufffd" not in cut
        assert count_tokens(cut) <= limit


def test_truncate_text_with_very_long_tokens() -> None:
    text = " " * 5000 + "end"
    cut = truncate_to_tokens(text, 1)
    assert text.startswith(cut)
    assert count_tokens(cut) == 1


def test_fallback_estimates_and_never_raises(no_encoding: None, caplog: pytest.LogCaptureFixture) -> None:
    with caplog.at_level(logging.WARNING, logger="transcript.tokens"):
        assert count_tokens("abcdefg") == 3
        assert count_tokens("") == 0
        assert count_message_tokens({"role": "user", "content": "abcdef", "name": "Al"}) == 4 + 2 + 1
        assert truncate_to_tokens("abcdefghij", 2) == "abcdef"
        assert truncate_to_tokens("abc", 2) == "abc"
    warnings = [r for r in caplog.records if r.levelno == logging.WARNING]
    assert len(warnings) == 1
