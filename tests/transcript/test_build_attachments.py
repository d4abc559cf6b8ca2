"""build_context: images as parts or placeholders; documents in every later turn."""

from __future__ import annotations

import json

from tests.transcript.factories import assistant, build, document, history, image, rolling, user
from transcript import Budget, Capabilities

REPORT = document("report.pdf", "Quarterly revenue rose by 12 percent.")


def test_images_become_parts_for_vision_models() -> None:
    rows = [user(1, "look", attachments=(image(data_url="data:image/jpeg;base64,AAA"),))]
    context = build(rows, capabilities=Capabilities(vision=True))
    assert history(context)[0]["content"] == [
        {"type": "text", "text": "look"},
        {"type": "image_url", "image_url": {"url": "data:image/jpeg;base64,AAA"}},
    ]
    assert context.stats.tokens.attachments == 85


def test_an_image_without_text_is_a_single_image_part() -> None:
    rows = [user(1, "", attachments=(image(data_url="data:x"),))]
    content = history(build(rows, capabilities=Capabilities(vision=True)))[0]["content"]
    assert content == [{"type": "image_url", "image_url": {"url": "data:x"}}]


def test_images_are_placeholders_without_vision() -> None:
    rows = [user(1, "look", attachments=(image(data_url="data:x"),))]
    assert history(build(rows))[0]["content"] == "look\n\n[image: cat.jpg, image/jpeg, 120 KB]"


def test_images_without_a_data_url_are_placeholders_even_with_vision() -> None:
    rows = [user(1, "look", attachments=(image(),))]
    content = history(build(rows, capabilities=Capabilities(vision=True)))[0]["content"]
    assert content == "look\n\n[image: cat.jpg, image/jpeg, 120 KB]"


def test_assistant_images_are_placeholders() -> None:
    rows = [user(1, "draw"), assistant(2, "here", attachments=(image(data_url="data:x"),))]
    content = history(build(rows, capabilities=Capabilities(vision=True)))[1]["content"]
    assert content == "here\n\n[image: cat.jpg, image/jpeg, 120 KB]"


def test_group_prefix_comes_before_the_parts_text() -> None:
    rows = [user(1, "look", sender_name="Al", attachments=(image(data_url="data:x"),))]
    content = history(build(rows, capabilities=Capabilities(vision=True), group=True))[0]["content"]
    assert content[0] == {"type": "text", "text": "Al: look"}


def test_a_document_in_the_window_is_rendered_in_its_message() -> None:
    context = build([user(1, "please read", attachments=(REPORT,))], documents=(REPORT,))
    assert history(context)[0]["content"] == (
        "please read\n\n[document: report.pdf]\nQuarterly revenue rose by 12 percent."
    )
    # Shown in its message, so not repeated in the preamble.
    assert context.messages[0]["content"] == "You are Sage."
    assert context.stats.tokens.attachments > 0
    assert context.stats.tokens.documents == 0


def test_a_long_document_is_cut_and_says_so() -> None:
    long_report = document("long.pdf", "alpha beta gamma delta epsilon zeta eta theta")
    context = build([user(1, "read", attachments=(long_report,))], budget=Budget(document_tokens=3))
    assert history(context)[0]["content"] == (
        "read\n\n[document: long.pdf]\nalpha beta gamma\n[… the rest of long.pdf is cut to fit the context …]"
    )


def test_a_document_without_text_is_named() -> None:
    scan = document("scan.pdf", None)
    content = history(build([user(1, "", attachments=(scan,))]))[0]["content"]
    assert content == "[document: scan.pdf, application/pdf, 2 KB; no text could be extracted]"


def test_the_newest_documents_get_the_shared_budget_first() -> None:
    old = document("old.pdf", "one two three four five six seven eight")
    new = document("new.pdf", "nine ten eleven twelve thirteen fourteen")
    rows = [user(1, "old", attachments=(old,)), assistant(2, "ok"), user(3, "new", attachments=(new,))]
    context = build(rows, budget=Budget(document_tokens=10, documents_total_tokens=6))
    old_content, _, new_content = (m["content"] for m in history(context))
    assert new_content == "new\n\n[document: new.pdf]\nnine ten eleven twelve thirteen fourteen"
    assert old_content == (
        "old\n\n[document: old.pdf, application/pdf, 2 KB; text left out, the documents budget is used up]"
    )


def test_every_document_comes_back_in_every_later_turn() -> None:
    notes = document("notes.txt", "The launch code is PINEAPPLE-42.")
    budget = Budget(max_messages=2)
    stored = [
        user(1, "here are my notes", attachments=(notes,)),
        assistant(2, "got them"),
        user(3, "what's the weather?"),
        assistant(4, "sunny"),
        user(5, "what was the launch code?"),
    ]
    for turn_rows in (stored[:1], stored[:3], stored[:5]):
        context = build(turn_rows, budget=budget, documents=(notes,))
        assert "The launch code is PINEAPPLE-42." in json.dumps(context.messages), turn_rows
    first = build(stored[:1], budget=budget, documents=(notes,))
    assert "PINEAPPLE-42" in history(first)[0]["content"]
    third = build(stored, budget=budget, documents=(notes,))
    assert third.stats.kept_seqs == (5,)
    # Outside the window the document follows the newest user message, not the steady system message.
    assert third.messages[0]["content"] == "You are Sage."
    assert third.messages[-1]["content"] == (
        "what was the launch code?\n\n## Documents shared earlier in this conversation\n"
        "[document: notes.txt]\nThe launch code is PINEAPPLE-42."
    )
    assert third.stats.tokens.documents > 0


def test_documents_of_rows_outside_the_window_return_without_being_passed() -> None:
    rows = [user(1, "notes", attachments=(REPORT,)), assistant(2, "ok"), user(3, "and?")]
    context = build(rows, budget=Budget(max_messages=1))
    assert "[document: report.pdf]\nQuarterly revenue" in context.messages[-1]["content"]


def test_earlier_documents_are_listed_oldest_first_and_each_once() -> None:
    first = document("first.pdf", "one")
    second = document("second.pdf", "two")
    context = build([user(9, "hi")], documents=(first, second, first))
    assert context.messages[-1]["content"] == (
        "hi\n\n## Documents shared earlier in this conversation\n"
        "[document: first.pdf]\none\n\n[document: second.pdf]\ntwo"
    )


def test_documents_move_to_the_preamble_when_the_budget_drops_their_message() -> None:
    rows = [
        user(1, "notes " * 200, attachments=(REPORT,)),
        assistant(2, "ok " * 200),
        user(3, "question"),
    ]
    context = build(rows, budget=Budget(max_tokens=200), documents=(REPORT,))
    assert context.stats.kept_seqs == (3,)
    assert "Quarterly revenue rose" in context.messages[-1]["content"]
    assert context.stats.total_tokens <= 200


def test_a_dropped_message_s_document_still_counts_against_the_budget() -> None:
    rows = [
        user(1, "notes", attachments=(REPORT,)),
        user(2, "first question"),
        user(3, "second question"),
        assistant(4, "an answer"),
        user(5, "third question"),
    ]
    everything = build(rows, documents=(REPORT,)).stats.total_tokens
    context = build(rows, budget=rolling(max_tokens=everything - 1), documents=(REPORT,))
    # Dropping message 1 moves its document into the preamble, heading and all,
    # which costs more than it saves: message 2 must go too.
    assert context.stats.kept_seqs == (3, 4, 5)
    assert context.stats.tokens.attachments == 0
    assert "Quarterly revenue rose" in context.messages[-1]["content"]
    assert context.stats.total_tokens <= everything - 1


def test_a_document_is_counted_once_against_the_budget() -> None:
    rows = [user(1, "notes", attachments=(REPORT,)), assistant(2, "ok"), user(3, "question")]
    everything = build(rows, documents=(REPORT,)).stats.total_tokens
    context = build(rows, budget=Budget(max_tokens=everything), documents=(REPORT,))
    assert context.stats.kept_seqs == (1, 2, 3)
    assert context.stats.total_tokens == everything
