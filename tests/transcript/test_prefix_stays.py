"""Steady first, changing last: between two turns the earlier request leads the later one.

With the window not yet full, request k's messages up to its newest user message are an
exact prefix of request k+1's, and the system message is byte-identical, even though each
turn recalls something else (recall follows the newest user message's text).
"""

from __future__ import annotations

import json

from tests.transcript.factories import assistant, build, user


def test_each_request_is_a_prefix_of_the_next_while_recall_changes_every_turn() -> None:
    rows = []
    requests = []
    for turn in range(8):
        rows.append(user(2 * turn + 1, f"message number {turn}"))
        context = build(
            rows, summary="We planned a trip.", memory="Alice likes trains.", recall=(f"hit {turn}",)
        )
        requests.append([json.dumps(message, sort_keys=True) for message in context.messages])
        rows.append(assistant(2 * turn + 2, f"reply number {turn}"))
    for earlier, later in zip(requests, requests[1:], strict=False):
        assert earlier[0] == later[0]
        # All but the newest user message (it carries this turn's recall) lead the next request,
        # and that message's own text leads its counterpart there.
        assert later[: len(earlier) - 1] == earlier[:-1]
        question = json.loads(earlier[-1])["content"].split("\n\n## Recalled", 1)[0]
        assert json.loads(later[len(earlier) - 1])["content"] == question
