"""A reply's Markdown as words to be spoken, cut at sentence ends into parts a lane can send."""

from __future__ import annotations

import re

import pyromark

# A code block is shown, not read out.
CODE_BLOCK_SPOKEN = "(The code is in the written reply.)"
_BLOCKS = {"Paragraph", "Heading", "Item", "BlockQuote", "TableRow", "TableHead"}
_ENDS_SENTENCE = re.compile(r"[.!?…。！？:;)]$")
_SENTENCE_END = re.compile(r"(?<=[.!?…。！？])\s+|\n+")


def spoken_text(markdown: str) -> str:
    """What a voice reads of a Markdown reply: its words, one line per block, no markup or code."""
    lines: list[str] = []
    current: list[str] = []
    in_code = False

    def end_line() -> None:
        line = " ".join("".join(current).split())
        if line:
            # A heading or list item read without a stop would run into the next line.
            lines.append(line if _ENDS_SENTENCE.search(line) else line + ".")
        current.clear()

    for event in pyromark.events(markdown):
        kind, payload = next(iter(event.items())) if isinstance(event, dict) else (str(event), None)
        if kind == "Start" and _block_name(payload) == "CodeBlock":
            end_line()
            in_code = True
        elif kind == "End" and _block_name(payload) == "CodeBlock":
            in_code = False
            lines.append(CODE_BLOCK_SPOKEN)
        elif kind in ("Text", "Code") and not in_code:
            current.append(str(payload))
        elif kind in ("SoftBreak", "HardBreak") and not in_code:
            current.append(" ")
        elif kind == "End" and _block_name(payload) in _BLOCKS:
            end_line()
    end_line()
    return "\n".join(lines)


def spoken_parts(text: str, max_chars: int) -> list[str]:
    """`text` in parts of at most `max_chars`, each ending at a sentence end where one fits.

    A sentence longer than a part is cut between words; a word longer than a part, inside it.
    """
    parts: list[str] = []
    current = ""
    for sentence in (piece.strip() for piece in _SENTENCE_END.split(text)):
        if not sentence:
            continue
        for piece in _fit(sentence, max_chars):
            joined = f"{current} {piece}" if current else piece
            if len(joined) <= max_chars:
                current = joined
            else:
                parts.append(current)
                current = piece
    if current:
        parts.append(current)
    return parts


def _fit(sentence: str, max_chars: int) -> list[str]:
    pieces: list[str] = []
    while len(sentence) > max_chars:
        cut = sentence.rfind(" ", 0, max_chars + 1)
        if cut <= 0:
            cut = max_chars
        pieces.append(sentence[:cut].rstrip())
        sentence = sentence[cut:].lstrip()
    if sentence:
        pieces.append(sentence)
    return pieces


def _block_name(payload: object) -> str:
    if isinstance(payload, str):
        return payload
    if isinstance(payload, dict) and payload:
        return str(next(iter(payload)))
    return ""
