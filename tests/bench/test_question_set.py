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
    questions, problems = checker.load_questions()
    assert problems == []
    assert checker.check(questions, locomo) == []
    assert len(questions) >= checker.MIN_QUESTIONS
    assert len({question.conversation for question in questions}) >= checker.MIN_CONVERSATIONS


def test_the_command_prints_the_summary_and_succeeds(
    locomo: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert checker.main(["--data", str(locomo)]) == 0
    out = capsys.readouterr().out
    assert "| all |" in out and "paraphrase" in out


def test_bad_entries_are_reported(locomo: Path) -> None:
    questions, _ = checker.load_questions()
    first = questions[0]
    broken = [
        replace(first, evidence=("D999:1",)),
        replace(first, id="c26-999", category="multi-hop", question="Which?", evidence=("D1:3",)),
        replace(first, id="c26-998", category="recall", question="What?"),
        replace(first, id="c26-997", category="temporal", question="When did it happen?", answer="Recently."),
    ]
    problems = checker.check(broken, locomo)
    joined = "\n".join(problems)
    assert "evidence not in conversation" in joined
    assert "needs at least 2 turns" in joined
    assert "unknown category 'recall'" in joined
    assert "must name the year" in joined
    assert f"only {len(broken)} questions" in joined


def test_malformed_file_entries_are_reported(tmp_path: Path) -> None:
    path = tmp_path / "questions.json"
    path.write_text(json.dumps({"questions": [{"id": "c26-001", "question": "?"}]}), encoding="utf-8")
    questions, problems = checker.load_questions(path)
    assert questions == []
    assert problems == [
        "c26-001: fields must be exactly id, conversation, category, question, evidence, answer"
    ]
