"""The recall question set in bench/data is well-formed and every evidence turn exists."""

from __future__ import annotations

import json
from dataclasses import replace
from pathlib import Path

import pytest

from bench.data import check_questions as checker
from tests.support.peers import locomo_or_skip


@pytest.fixture(scope="module")
def locomo() -> Path:
    return locomo_or_skip()


def test_the_shipped_set_passes_every_check(locomo: Path) -> None:
    question_set, problems = checker.load_set()
    assert problems == []
    assert checker.check(question_set, locomo) == []
    assert len(question_set.questions) >= checker.MIN_QUESTIONS
    every_conversation = {path.stem for path in locomo.glob("*.json")}
    assert {question.conversation for question in question_set.questions} == every_conversation


def test_the_command_prints_the_summary_and_succeeds(
    locomo: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert checker.main(["--data", str(locomo)]) == 0
    out = capsys.readouterr().out
    assert "| all |" in out and "open-domain" in out and "(held out)" in out


def test_bad_entries_are_reported(locomo: Path) -> None:
    question_set, _ = checker.load_set()
    first = question_set.questions[0]
    broken = [
        replace(first, evidence=("D999:1",)),
        replace(first, id="c26-999", category="multi-hop", question="Which?", evidence=("D1:3", "D1:5")),
        replace(first, id="c26-998", category="recall", question="What?"),
        replace(first, id="c26-997", category="temporal", question="When did it happen?", answer="Recently."),
        replace(first, id="c26-996", category="open-domain", question="What is her dog called?"),
    ]
    problems = checker.check(checker.QuestionSet(broken, frozenset({"26", "41"})), locomo)
    joined = "\n".join(problems)
    assert "evidence not in conversation" in joined
    assert "needs turns of at least 2 sessions" in joined
    assert "unknown category 'recall'" in joined
    assert "must name the year" in joined
    assert "must ask for an inference" in joined
    assert f"only {len(broken)} questions" in joined
    assert "no questions for conversations" in joined
    assert "held-out conversations ['41'] have no questions" in joined
    assert "the tuned part has no" not in joined  # nothing is tuned: no part to check


def test_the_held_out_part_is_whole_conversations_of_every_category(locomo: Path) -> None:
    question_set, _ = checker.load_set()
    tuned_only = checker.QuestionSet(question_set.part(held_out=False), question_set.held_out)
    joined = "\n".join(checker.check(tuned_only, locomo))
    assert f"at least {checker.MIN_HELD_OUT_CONVERSATIONS} conversations must be held out" in joined
    assert "the held-out part is 0% of the set" in joined
    no_temporal = [
        q
        for q in question_set.questions
        if not (q.category == "temporal" and q.conversation in question_set.held_out)
    ]
    joined = "\n".join(checker.check(checker.QuestionSet(no_temporal, question_set.held_out), locomo))
    assert "the held-out part has no temporal questions" in joined


def test_malformed_file_entries_are_reported(tmp_path: Path) -> None:
    path = tmp_path / "questions.json"
    path.write_text(json.dumps({"questions": [{"id": "c26-001", "question": "?"}]}), encoding="utf-8")
    question_set, problems = checker.load_set(path)
    assert question_set.questions == []
    assert problems == [
        "c26-001: fields must be exactly id, conversation, category, question, evidence, answer"
    ]
