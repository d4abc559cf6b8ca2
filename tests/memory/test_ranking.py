"""Ranking recall candidates: rare terms weigh more, short precise texts beat long ones."""

from __future__ import annotations

from bot.memory.ranking import relevance_scores, stem


def test_stem_lets_inflections_meet():
    assert stem("deployed") == stem("deploys") == stem("deploy") == "deploy"
    assert stem("is") == "is"


def test_texts_without_any_term_score_zero():
    assert relevance_scores(["nothing to see", "the cat sat"], ["deploy"]) == [0.0, 0.0]


def test_a_rare_term_outweighs_a_common_one():
    texts = ["the server is down", "the server rebooted", "the server ran out of disk", "disk quota"]
    scores = relevance_scores(texts, ["server", "disk"])
    # "disk" occurs in two texts, "server" in three: the text with both ranks first,
    # and the one with only the rarer term beats those with only the common one.
    assert scores.index(max(scores)) == 2
    assert scores[3] > scores[0] and scores[3] > scores[1]


def test_shorter_text_wins_when_terms_tie():
    short, long = "we deployed on friday", "we deployed on friday " + "and talked about many other things " * 20
    first, second = relevance_scores([short, long], ["deploy", "friday"])
    assert first > second > 0


def test_terms_match_at_word_starts_and_inside_unspaced_scripts():
    scores = relevance_scores(["an update went out", "dates were set", "我们决定用数据库"], ["date", "数据"])
    assert scores[0] == 0.0
    assert scores[1] > 0
    assert scores[2] > 0
