"""BERT's uncased WordPiece tokenizer, the one all-MiniLM-L6-v2 was trained with.

The `tokenizers` package does this too, but brings `huggingface_hub` and its download
client along (31 MB of the dense install, for a fixed vocabulary that is never
downloaded). The algorithm is BERT's own and small: clean the text, put spaces around
CJK characters, strip accents and lower-case, split on whitespace and punctuation, then
cut each word into the longest vocabulary pieces from its start (`##` marks a piece
that continues a word). The tests check it against `tokenizers` on every LoCoMo turn.
"""

from __future__ import annotations

import unicodedata
from collections.abc import Sequence
from functools import cache, lru_cache
from pathlib import Path

# A word longer than this is one unknown token, as in BERT.
MAX_WORD_CHARS = 100
CONTINUATION = "##"
# Classified characters kept: far more than a conversation uses, and bounded, since a
# stranger's text may hold any of Unicode's million code points.
CHARACTER_CACHE = 8192
# BERT's "CJK Unified Ideographs" blocks: each such character is a word of its own.
_CJK_RANGES = (
    (0x4E00, 0x9FFF),
    (0x3400, 0x4DBF),
    (0x20000, 0x2A6DF),
    (0x2A700, 0x2B73F),
    (0x2B740, 0x2B81F),
    (0x2B820, 0x2CEAF),
    (0xF900, 0xFAFF),
    (0x2F800, 0x2FA1F),
)


def _is_whitespace(char: str) -> bool:
    return char in " \t\n\r" or unicodedata.category(char) == "Zs"


def _is_control(char: str) -> bool:
    # Tab, newline and carriage return count as whitespace, not as control characters.
    return char not in "\t\n\r" and unicodedata.category(char).startswith("C")


def _is_punctuation(char: str) -> bool:
    # Every non-letter, non-digit ASCII sign counts ("$", "^", "`"), as in BERT.
    code = ord(char)
    if 33 <= code <= 47 or 58 <= code <= 64 or 91 <= code <= 96 or 123 <= code <= 126:
        return True
    return unicodedata.category(char).startswith("P")


def _is_cjk(char: str) -> bool:
    code = ord(char)
    return any(low <= code <= high for low, high in _CJK_RANGES)


@lru_cache(maxsize=CHARACTER_CACHE)
def _cleaned(char: str) -> str:
    """What cleaning makes of one character: nothing, a space, or itself (CJK: spaced)."""
    if char == "\x00" or char == "\ufffd" or _is_control(char):
        return ""
    if _is_whitespace(char):
        return " "
    return f" {char} " if _is_cjk(char) else char


# Characters are classified once each: a text has few distinct ones, and looking a
# character up costs far less than asking `unicodedata` again.
_is_split_point = lru_cache(maxsize=CHARACTER_CACHE)(_is_punctuation)


def words(text: str) -> list[str]:
    """The text normalised and split as BERT's basic tokenizer does (uncased)."""
    cleaned = "".join(map(_cleaned, text))
    if not cleaned.isascii():  # ASCII has no accents to strip
        decomposed = unicodedata.normalize("NFD", cleaned)
        cleaned = "".join(char for char in decomposed if unicodedata.category(char) != "Mn")
    found: list[str] = []
    for chunk in cleaned.lower().split():
        word: list[str] = []
        for char in chunk:
            if _is_split_point(char):
                if word:
                    found.append("".join(word))
                    word = []
                found.append(char)
            else:
                word.append(char)
        if word:
            found.append("".join(word))
    return found


class WordPiece:
    """Token ids of texts for a BERT vocabulary file (one token a line, its id the line number)."""

    def __init__(self, vocabulary: Sequence[str]) -> None:
        self.ids = {token: index for index, token in enumerate(vocabulary)}
        self.unknown = self.ids["[UNK]"]
        self.start = self.ids["[CLS]"]
        self.end = self.ids["[SEP]"]
        self.longest = max(len(token) for token in vocabulary)

    @classmethod
    @cache
    def load(cls, path: Path) -> WordPiece:
        return cls(path.read_text(encoding="utf-8").splitlines())

    def encode(self, text: str, max_length: int) -> list[int]:
        """[CLS], the text's pieces, [SEP]: at most `max_length` ids (the text is cut)."""
        pieces: list[int] = []
        room = max_length - 2
        for word in words(text):
            pieces.extend(self._pieces(word))
            if len(pieces) >= room:
                break
        return [self.start, *pieces[:room], self.end]

    def _pieces(self, word: str) -> list[int]:
        if len(word) > MAX_WORD_CHARS:
            return [self.unknown]
        found: list[int] = []
        start = 0
        while start < len(word):
            prefix = CONTINUATION if start else ""
            end = min(len(word), start + self.longest)
            while end > start and prefix + word[start:end] not in self.ids:
                end -= 1
            if end == start:
                return [self.unknown]  # no piece fits: the whole word is unknown
            found.append(self.ids[prefix + word[start:end]])
            start = end
        return found
