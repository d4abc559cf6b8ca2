"""Thinking inside a reply's text: `<think>…</think>`, split from the answer as it streams.

Qwen3 and the DeepSeek-R1 distills (on Ollama, or any server without a reasoning parser)
put their thinking in the content, between `<think>` and `</think>`. `ThinkSplitter` turns
the content's pieces into `TextDelta`s and `ReasoningDelta`s in order, whether the tags
come whole or split across chunks, at the start or anywhere. A think a model never closes
is reasoning to the end (`unclosed` says so): it is never shown as the answer.
"""

from __future__ import annotations

from bot.providers.base import ReasoningDelta, TextDelta

OPEN_TAG = "<think>"
CLOSE_TAG = "</think>"

ContentDelta = TextDelta | ReasoningDelta


class ThinkSplitter:
    """Splits streamed content into answer text and thinking; `feed` each piece, then `close`."""

    def __init__(self) -> None:
        self._thinking = False
        # The end of what arrived that may be the start of a tag: held until the next piece says.
        self._held = ""
        # Nothing but whitespace has been answered yet: the blank after `</think>` is dropped.
        self._answer_started = False

    @property
    def unclosed(self) -> bool:
        """Whether the content ended (or is now) inside a think."""
        return self._thinking

    def feed(self, piece: str) -> list[ContentDelta]:
        """The deltas `piece` completes; a possible partial tag at its end waits for the next."""
        text = self._held + piece
        self._held = ""
        deltas: list[ContentDelta] = []
        while text:
            tag = CLOSE_TAG if self._thinking else OPEN_TAG
            found = text.find(tag)
            if found >= 0:
                self._emit(deltas, text[:found])
                self._thinking = not self._thinking
                text = text[found + len(tag) :]
                continue
            keep = _partial_tag_length(text, tag)
            self._emit(deltas, text[: len(text) - keep])
            self._held = text[len(text) - keep :]
            break
        return deltas

    def close(self) -> list[ContentDelta]:
        """What is still held at the end of the content (a tag's start that never finished)."""
        held, self._held = self._held, ""
        deltas: list[ContentDelta] = []
        self._emit(deltas, held)
        return deltas

    def _emit(self, deltas: list[ContentDelta], text: str) -> None:
        if not text:
            return
        if self._thinking:
            deltas.append(ReasoningDelta(text))
            return
        if not self._answer_started:
            # Models put a blank line or two between the think and the answer.
            text = text.lstrip()
            if not text:
                return
            self._answer_started = True
        deltas.append(TextDelta(text))


def _partial_tag_length(text: str, tag: str) -> int:
    """How many characters at the end of `text` are the start of `tag` (0 when none)."""
    for length in range(min(len(tag) - 1, len(text)), 0, -1):
        if text.endswith(tag[:length]):
            return length
    return 0
