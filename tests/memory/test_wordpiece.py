"""The dense encoder's WordPiece tokenizer gives the ids the `tokenizers` package gives."""

from __future__ import annotations

import json

import pytest

from bot.memory.minilm import MAX_LENGTH, VOCABULARY
from bot.memory.wordpiece import WordPiece
from tests.support.peers import locomo_or_skip

tokenizers = pytest.importorskip("tokenizers")

AWKWARD = [
    "",
    "   ",
    "Café déjà vu — naïve façade!",
    "İstanbul ÅNGSTRÖM Straße ﬁne",
    "我们决定用新的数据库, ok?",
    "tabs\tand\nnew\r\nlines\x0bvertical\x0cfeed\u2028line\u2029para\u00a0nbsp",
    "control\x00chars\x07and\ufffdreplacement\u200bzero-width",
    "emoji 🎉🙂 and symbols $5 ^caret^ `tick` ~tilde~ <tag> «quotes» ¿qué?",
    "supercalifragilisticexpialidocious " * 3,
    "x" * 101 + " " + "y" * 100,
    "don't won't I'm rock'n'roll e-mail 3.14 1,000,000 #hashtag @mention",
    "word " * 400,  # cut at the model's 256 tokens
]


def reference() -> object:
    tokenizer = tokenizers.BertWordPieceTokenizer(str(VOCABULARY), lowercase=True)
    tokenizer.no_padding()
    tokenizer.enable_truncation(MAX_LENGTH)
    return tokenizer


def test_awkward_texts_get_the_reference_ids() -> None:
    ours, theirs = WordPiece.load(VOCABULARY), reference()
    for text in AWKWARD:
        assert ours.encode(text, MAX_LENGTH) == theirs.encode(text).ids, text  # type: ignore[attr-defined]


def test_every_locomo_turn_gets_the_reference_ids() -> None:
    ours, theirs = WordPiece.load(VOCABULARY), reference()
    texts = [
        f"{turn['speaker']}: {turn['text']}"
        for path in sorted(locomo_or_skip().glob("*.json"))
        for key, session in json.loads(path.read_text(encoding="utf-8")).items()
        if key.startswith("session_") and isinstance(session, list)
        for turn in session
    ]
    assert len(texts) == 5882
    expected = [encoding.ids for encoding in theirs.encode_batch(texts)]  # type: ignore[attr-defined]
    assert [ours.encode(text, MAX_LENGTH) for text in texts] == expected
