"""A reply read as words and cut at sentence ends into the parts a platform takes."""

from __future__ import annotations

from bot.speech.spoken_text import CODE_BLOCK_SPOKEN, spoken_parts, spoken_text


def test_markup_is_not_read_and_code_is_named_not_spelled() -> None:
    reply = (
        "# Plan\n\n- **water** the [plants](https://example.org)\n- feed the cat\n\n"
        "```py\nprint(1)\n```\nDone"
    )

    assert spoken_text(reply) == f"Plan.\nwater the plants.\nfeed the cat.\n{CODE_BLOCK_SPOKEN}\nDone."


def test_long_text_is_cut_at_sentence_ends_within_the_limit() -> None:
    sentences = [f"Sentence number {n} says a little more." for n in range(40)]

    parts = spoken_parts(" ".join(sentences), 200)

    assert len(parts) > 1 and all(len(part) <= 200 for part in parts)
    assert all(part.endswith(".") for part in parts)
    assert " ".join(parts) == " ".join(sentences)


def test_a_sentence_longer_than_a_part_is_cut_between_words() -> None:
    sentence = " ".join(["word"] * 100) + "."

    parts = spoken_parts(sentence, 50)

    assert all(len(part) <= 50 for part in parts)
    assert " ".join(parts) == sentence
