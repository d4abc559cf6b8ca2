"""Normalised tokens: one definition shared by de-duplication and full-text search.

Latin text splits into lower-cased words; CJK text has no spaces, so each Han,
Kana or Hangul character is its own token for search, and adjacent pairs are
used for similarity (single characters are too common to tell sentences apart).
Latin-script stop words come from the `stopwords` package's list (the classic
English list, contractions included); contractions lose their clitic
("Caroline's" → "caroline"), so no fragment like "s" is left. CJK is indexed by
character, where a word list would cut content words apart (据 of 数据), so only
grammatical particles and pronouns are dropped there.
"""

from __future__ import annotations

import hashlib
import re
import unicodedata
from functools import cache

import stopwords

# A word may carry apostrophes inside ("don't", "caroline's"); they are resolved below.
_WORD = re.compile(r"[^\W_]+(?:'[^\W_]+)*", re.UNICODE)
_CJK = re.compile(r"[\u3040-\u30ff\u3400-\u4dbf\u4e00-\u9fff\uac00-\ud7af\uf900-\ufaff]")
_APOSTROPHES = str.maketrans({"\u2019": "'", "\u2018": "'", "\u02bc": "'", "`": "'"})
# What a contraction or possessive adds to a word, dropped to leave the word itself.
_CLITIC = re.compile(r"(?:'s|'ll|'re|'ve|'d|'m|n't|')$")

# The languages whose word lists apply to Latin-script words.
SEARCH_LANGUAGES = ("english",)
# Chinese and Japanese particles and pronouns: never what a search is about.
CJK_STOP_CHARACTERS = frozenset(
    "的了是在我你他她它们这那和与也就都而及着吗呢吧啊之其或被把给の에는は를이가을"
)


@cache
def stop_words() -> frozenset[str]:
    """Every configured language's stop words (apostrophes normalised) and the CJK particles."""
    found: set[str] = set(CJK_STOP_CHARACTERS)
    for language in SEARCH_LANGUAGES:
        for word in stopwords.get_stopwords(language):
            word = unicodedata.normalize("NFKC", word).lower().translate(_APOSTROPHES).strip()
            if word:
                found.add(word)
    return frozenset(found)


def words(text: str) -> list[str]:
    """Lower-cased words and single CJK characters, in order, stop words dropped."""
    return [token for token in _tokens(text) if token not in stop_words()]


def similarity_tokens(text: str) -> frozenset[str]:
    """Tokens for Jaccard similarity: words, and CJK character pairs."""
    tokens: set[str] = set()
    dropped = stop_words()
    for word in _raw_words(text):
        if not _CJK.search(word):
            latin = _latin_word(word)
            if latin and latin not in dropped:
                tokens.add(latin)
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


def _raw_words(text: str) -> list[str]:
    normalised = unicodedata.normalize("NFKC", text).lower().translate(_APOSTROPHES)
    return _WORD.findall(normalised)


def _tokens(text: str) -> list[str]:
    found: list[str] = []
    dropped = stop_words()
    for word in _raw_words(text):
        if _CJK.search(word):
            found.extend(_split_cjk(word))
        elif word not in dropped:
            latin = _latin_word(word)
            if latin:
                found.append(latin)
    return found


def _latin_word(word: str) -> str:
    """The word without its clitic and apostrophes; empty for a lone letter."""
    stem = _CLITIC.sub("", word).replace("'", "")
    # A single letter is a fragment ("s", "t"), never a search term; digits stay.
    return stem if len(stem) > 1 or stem.isdigit() else ""


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
        pieces.append(_latin_word(latin) or latin)
    return pieces
