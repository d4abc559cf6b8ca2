"""Cutting a message that alone overflows the budget: keep both ends, mark the middle."""

from __future__ import annotations

from transcript.tokens import count_tokens

# How much of an overflowing newest message survives even when the budget has
# no room at all: the model needs something to answer, and the engine's
# overflow recovery handles a request that is still too large.
_MIN_KEPT_CHARS = 100
# Cutting estimates tokens from characters; a few rounds settle the estimate.
_CUT_ROUNDS = 4


def shorten(text: str, text_tokens: int, *, excess_tokens: int, excess_chars: int) -> tuple[str, int]:
    """`text` with its middle cut out until it is `excess_*` shorter, and its token count.

    The beginning usually sets the scene and the end holds the actual ask, so
    both are kept.
    """
    if len(text) <= _MIN_KEPT_CHARS:
        return text, text_tokens
    token_target = text_tokens - excess_tokens
    char_target = len(text) - excess_chars
    keep = min(char_target, len(text) * token_target // max(text_tokens, 1))
    for _ in range(_CUT_ROUNDS):
        shortened = cut_middle(text, max(keep, _MIN_KEPT_CHARS))
        tokens = count_tokens(shortened)
        if tokens <= token_target or keep <= _MIN_KEPT_CHARS:
            break
        keep = keep * token_target // tokens
    return shortened, tokens


def cut_middle(text: str, max_chars: int) -> str:
    """`text` within `max_chars` characters, its middle replaced by a note of what was cut."""
    if len(text) <= max_chars:
        return text
    kept = max(max_chars - len(_cut_note(len(text))), 0)
    head = (kept + 1) // 2
    tail = kept - head
    return text[:head] + _cut_note(len(text) - kept) + text[len(text) - tail :]


def _cut_note(cut: int) -> str:
    return f"\n[… {cut} characters cut …]\n"
