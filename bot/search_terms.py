"""Normalised tokens: one definition shared by de-duplication and full-text search.

Latin text splits into lower-cased words; CJK text has no spaces, so each Han,
Kana or Hangul character is its own token for search, and adjacent pairs are
used for similarity (single characters are too common to tell sentences apart).
"""

from __future__ import annotations

import hashlib
import re
import unicodedata

_WORD = re.compile(r"[^\W_]+", re.UNICODE)
_CJK = re.compile(r"[\u3040-\u30ff\u3400-\u4dbf\u4e00-\u9fff\uac00-\ud7af\uf900-\ufaff]")

# Words that carry no meaning for matching; kept short on purpose.
_STOPWORD_TEXT = (
    "a an and are as at be but by do does for from had has have i in is it its me my of on or our so "
    "that the their them they this to was we were what when where which who will with you your"
)
STOPWORDS = frozenset(_STOPWORD_TEXT.split())


def words(text: str) -> list[str]:
    """Lower-cased words and single CJK characters, in order, stopwords dropped."""
    normalised = unicodedata.normalize("NFKC", text).lower()
    found: list[str] = []
    for word in _WORD.findall(normalised):
        if _CJK.search(word):
            found.extend(_split_cjk(word))
        elif word not in STOPWORDS:
            found.append(word)
    return found


def similarity_tokens(text: str) -> frozenset[str]:
    """Tokens for Jaccard similarity: words, and CJK character pairs."""
    tokens: set[str] = set()
    normalised = unicodedata.normalize("NFKC", text).lower()
    for word in _WORD.findall(normalised):
        if not _CJK.search(word):
            if word not in STOPWORDS:
                tokens.add(word)
            continue
        pieces = _split_cjk(word)
        cjk = [piece for piece in pieces if len(piece) == 1 and _CJK.match(piece)]
        tokens.update(piece for piece in pieces if not _CJK.match(piece))
        tokens.update(a + b for a, b in zip(cjk, cjk[1:], strict=False))
        if len(cjk) == 1:
            tokens.add(cjk[0])
    return frozenset(tokens)


def jaccard(left: frozenset[str], right: frozenset[str]) -> float:
    if not left and not right:
        return 1.0
    return len(left & right) / len(left | right)


def search_text(text: str) -> str:
    """The text a full-text index stores: words separated by spaces, CJK split."""
    return " ".join(words(text))


def content_key(text: str) -> str:
    """Equal for texts that differ only in case, spacing, punctuation or word order."""
    canonical = " ".join(sorted(set(words(text))))
    return hashlib.sha256(canonical.encode("utf-8")).hexdigest()[:32]


def _split_cjk(word: str) -> list[str]:
    # "用pnpm替代npm" → ["用", "pnpm", "替", "代", "npm"]
    pieces: list[str] = []
    latin = ""
    for character in word:
        if _CJK.match(character):
            if latin:
                pieces.append(latin)
                latin = ""
            pieces.append(character)
        else:
            latin += character
    if latin:
        pieces.append(latin)
    return pieces
