"""The offline rule distiller and parsing of the model distiller's answer."""

from __future__ import annotations

from bot.memory.distill import SourceBlock, classify_sentence, distill_by_rules, parse_model_items


def test_sentences_are_classified_by_their_cues() -> None:
    assert classify_sentence("We decided to switch to PostgreSQL for billing.") == ("decision", 8)
    assert classify_sentence("You must never deploy on a Friday afternoon.") == ("constraint", 8)
    assert classify_sentence("It turns out the cache bug came from a stale key.") == ("conclusion", 6)
    assert classify_sentence("My daughter started school last week.") == ("fact", 5)


def test_questions_small_talk_and_cue_less_sentences_are_dropped() -> None:
    assert classify_sentence("Should we switch to PostgreSQL?") is None
    assert classify_sentence("Wow, cool!") is None
    assert classify_sentence("The weather looked grey over the harbour today.") is None


def test_a_path_does_not_make_a_constraint() -> None:
    assert classify_sentence("Please open docs/must-read/never.md for the layout") is None


def test_rules_keep_the_most_important_items_in_transcript_order() -> None:
    blocks = [
        SourceBlock(1, "Alice", "My cat is called Miso. We decided to use Redis 7 for sessions."),
        SourceBlock(2, "Bob", "You must never commit secrets. Nice weather today."),
    ]
    items = distill_by_rules(blocks, max_items=2)
    assert [(item.kind, item.content, item.seq) for item in items] == [
        ("decision", "Alice: We decided to use Redis 7 for sessions.", 1),
        ("constraint", "Bob: You must never commit secrets.", 2),
    ]


def test_model_answers_are_parsed_from_fenced_json_with_fallbacks() -> None:
    answer = (
        "```json\n"
        '{"items": [{"kind": "Decision", "content": "Use Redis", "importance": 12},'
        ' {"kind": "opinion", "content": "Tea is nice"}, {"kind": "fact", "content": ""}]}\n```'
    )
    items = parse_model_items(answer, 10)
    assert items is not None
    assert [(item.kind, item.content, item.importance, item.source) for item in items] == [
        ("decision", "Use Redis", 10, "model"),
        ("fact", "Tea is nice", 5, "model"),
    ]
    assert parse_model_items("I cannot help with that.", 10) is None
    assert parse_model_items('{"items": "nope"}', 10) is None
