"""Relevance of a few recall candidates to a query, computed here rather than in SQL.

SQLite's bm25() needs statistics over every row that matches a term, so its cost
grows with the history; recall instead takes the newest matches (cheap, bounded)
and ranks just those: each query term weighs by how rare it is among them, and
long texts are damped so a short precise hit beats a long rambling one.
"""

from __future__ import annotations

import math
import re
from collections.abc import Sequence

_SUFFIXES = ("ing", "ed", "es", "ly", "s")
# Characters of scripts written without spaces: matched anywhere, not at word starts.
_NO_SPACES = re.compile(r"[\u3040-\u30ff\u3400-\u4dbf\u4e00-\u9fff\uac00-\ud7af\uf900-\ufaff]")


def stem(word: str) -> str:
    """A light stemmer: enough to let "deployed" match "deploy" like the index does."""
    for suffix in _SUFFIXES:
        if word.endswith(suffix) and len(word) - len(suffix) >= 3:
            return word[: -len(suffix)]
    return word


def _pattern(term: str) -> re.Pattern[str]:
    # A word starting with the stem: "deploy" finds "deployed" and "deploys".
    prefix = "" if _NO_SPACES.search(term) else r"\b"
    return re.compile(prefix + re.escape(stem(term.lower())))


def relevance_scores(texts: Sequence[str], terms: Sequence[str]) -> list[float]:
    """A score per text (higher is more relevant); 0 when no term occurs."""
    patterns = [_pattern(term) for term in dict.fromkeys(terms)]
    lowered = [text.lower() for text in texts]
    found = [[pattern.search(text) is not None for pattern in patterns] for text in lowered]
    count = len(texts)
    weights = [
        math.log(1 + count / (1 + sum(hits[index] for hits in found))) for index in range(len(patterns))
    ]
    return [
        sum(weight for weight, hit in zip(weights, hits, strict=True) if hit)
        / (1 + math.log1p(len(text) / 80) / 4)
        for text, hits in zip(texts, found, strict=True)
    ]
