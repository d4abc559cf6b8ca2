"""Text documents in the encodings people actually save them in become readable text."""

from __future__ import annotations

import pytest

from bot.storage.sanitise import clean_text
from bot.turns.attachments import decode_text

SAMPLES = [
    ("Chère cliente, merci pour votre message. Nous étudions votre demande.", "latin-1"),
    ("Sehr geehrte Damen und Herren, vielen Dank für Ihre Nachricht. Grüße!", "cp1252"),
    ("Привет, как дела? Это тестовый документ для проверки.", "cp1251"),
    ("これは日本語のテキストです。読めるはずです。", "shift_jis"),
    ("这是一个中文文本文件，应该可以读取。", "gbk"),
    ("Grüße aus Köln, without a byte-order mark", "utf-16-le"),
    ("plain ascii stays as it is", "ascii"),
]


@pytest.mark.parametrize(("text", "encoding"), SAMPLES, ids=[encoding for _, encoding in SAMPLES])
def test_decoded_by_detected_charset(text: str, encoding: str) -> None:
    assert decode_text(text.encode(encoding)) == text


@pytest.mark.parametrize("encoding", ["utf-8-sig", "utf-16", "utf-32"])
def test_decoded_by_byte_order_mark(encoding: str) -> None:
    assert decode_text("Grüße — 你好".encode(encoding)) == "Grüße — 你好"


def test_clean_text_drops_controls_and_repairs_lone_surrogates() -> None:
    assert clean_text("a\x00b\x07c\td\ne\r") == "abc\td\ne\r"
    assert clean_text("half \ud83d pair") == "half \ufffd pair"
    assert clean_text("\ud83d\ude00") == "😀"
