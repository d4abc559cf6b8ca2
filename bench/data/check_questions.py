"""Validate the recall question set against the LoCoMo conversations it was written from.

Run `python bench/data/check_questions.py` (optionally `--data DIR`, or `CHORUS_LOCOMO_DIR`):
it prints a table of questions per conversation and category and exits non-zero, listing every
problem, when an id, category, evidence turn or count is wrong.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import sys
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

HERE = Path(__file__).resolve().parent
QUESTIONS_FILE = HERE / "recall_questions.json"

# Target share of each category: LoCoMo's own question mix (841 single-hop, 282 multi-hop,
# 321 temporal and 96 open-domain questions over its ten conversations); a set may drift
# from it by SHARE_TOLERANCE either way.
CATEGORY_SHARES: dict[str, float] = {
    "single-hop": 841 / 1540,
    "multi-hop": 282 / 1540,
    "temporal": 321 / 1540,
    "open-domain": 96 / 1540,
}
SHARE_TOLERANCE = 0.04
MIN_QUESTIONS = 600
MIN_PER_CONVERSATION = 50
# A multi-hop question joins facts said at different times: turns of two or more sessions.
MIN_MULTI_HOP_SESSIONS = 2
# The held-out part (whole conversations, never tuned on) must be large enough to measure.
MIN_HELD_OUT_CONVERSATIONS = 3
MIN_HELD_OUT_SHARE = 0.3
# An open-domain question asks for an inference ("Would Melanie enjoy …?", "What kind of …?"),
# not for a fact that was said.
INFERENCE = re.compile(
    r"^(?:would|could|might|is|are|does|do|did|can|will|should|what (?:kind|type|sort))\b"
    r"|\b(?:likely|probably|might|would)\b",
    re.IGNORECASE,
)

FIELDS = ("id", "conversation", "category", "question", "evidence", "answer")
DIA_ID = re.compile(r"D(\d+):(\d+)")
QUESTION_ID = re.compile(r"c(\d+)-(\d{3})")
# A temporal question is only checkable if the date it asks about, or answers with, is written out.
YEAR = re.compile(r"\b(19|20)\d\d\b")


@dataclass(frozen=True)
class Question:
    id: str
    conversation: str
    category: str
    question: str
    evidence: tuple[str, ...]
    answer: str


def locomo_dir() -> Path | None:
    """The LoCoMo folder: CHORUS_LOCOMO_DIR, else the nearest `shared/data/locomo` above this file.

    Worktrees sit one level deeper than the main checkout, so the data is searched upwards.
    """
    configured = os.environ.get("CHORUS_LOCOMO_DIR")
    if configured:
        return Path(configured)
    for parent in HERE.parents:
        candidate = parent / "shared" / "data" / "locomo"
        if candidate.is_dir():
            return candidate
    return None


@dataclass(frozen=True)
class QuestionSet:
    questions: list[Question]
    # Conversations whose questions are never tuned on: recall is measured on them apart.
    held_out: frozenset[str]

    def part(self, held_out: bool) -> list[Question]:
        return [
            question for question in self.questions if (question.conversation in self.held_out) == held_out
        ]


def load_set(path: Path = QUESTIONS_FILE) -> tuple[QuestionSet, list[str]]:
    """Parse the question file; malformed entries are reported, not raised."""
    raw = json.loads(path.read_text(encoding="utf-8"))
    entries = raw.get("questions") if isinstance(raw, dict) else None
    if not isinstance(entries, list):
        return QuestionSet([], frozenset()), [f"{path.name}: expected an object with a 'questions' list"]
    held_out = raw.get("held_out", [])
    problems: list[str] = []
    if not isinstance(held_out, list) or not all(isinstance(item, str) for item in held_out):
        problems.append(f"{path.name}: 'held_out' must be a list of conversation ids")
        held_out = []
    questions: list[Question] = []
    for index, entry in enumerate(entries):
        where = entry.get("id", f"#{index}") if isinstance(entry, dict) else f"#{index}"
        if not isinstance(entry, dict) or set(entry) != set(FIELDS):
            problems.append(f"{where}: fields must be exactly {', '.join(FIELDS)}")
            continue
        evidence = entry["evidence"]
        texts = [entry[name] for name in FIELDS if name != "evidence"]
        if not all(isinstance(text, str) and text.strip() for text in texts):
            problems.append(
                f"{where}: id, conversation, category, question and answer must be non-empty text"
            )
            continue
        if not isinstance(evidence, list) or not all(isinstance(item, str) for item in evidence):
            problems.append(f"{where}: evidence must be a list of dia_ids")
            continue
        questions.append(
            Question(
                id=entry["id"],
                conversation=entry["conversation"],
                category=entry["category"],
                question=entry["question"],
                evidence=tuple(evidence),
                answer=entry["answer"],
            )
        )
    return QuestionSet(questions, frozenset(held_out)), problems


def conversation_turns(path: Path) -> set[str]:
    """Every dia_id of one LoCoMo conversation file."""
    data = json.loads(path.read_text(encoding="utf-8"))
    turns: set[str] = set()
    index = 1
    while f"session_{index}" in data:
        turns.update(turn["dia_id"] for turn in data[f"session_{index}"] or [])
        index += 1
    return turns


def check(question_set: QuestionSet, data_dir: Path | None) -> list[str]:
    """Every problem with the set; empty when it is sound.

    Evidence, and that every conversation has questions, are checked when data_dir is given.
    """
    questions = question_set.questions
    problems: list[str] = []
    seen_ids: set[str] = set()
    seen_questions: set[tuple[str, str]] = set()
    turns_by_conversation: dict[str, set[str] | None] = {}
    for question in questions:
        problems.extend(_check_one(question, seen_ids, seen_questions))
        if data_dir is None:
            continue
        if question.conversation not in turns_by_conversation:
            path = data_dir / f"{question.conversation}.json"
            turns_by_conversation[question.conversation] = (
                conversation_turns(path) if path.is_file() else None
            )
        turns = turns_by_conversation[question.conversation]
        if turns is None:
            problems.append(f"{question.id}: no conversation file {question.conversation}.json")
            continue
        missing = [dia_id for dia_id in question.evidence if dia_id not in turns]
        if missing:
            problems.append(f"{question.id}: evidence not in conversation {question.conversation}: {missing}")
    if data_dir is not None:
        missing_conversations = sorted(
            {path.stem for path in data_dir.glob("*.json")}
            - {question.conversation for question in questions}
        )
        if missing_conversations:
            problems.append(f"no questions for conversations {missing_conversations}")
    problems.extend(_check_counts(questions))
    problems.extend(_check_split(question_set))
    return problems


def _check_one(question: Question, seen_ids: set[str], seen_questions: set[tuple[str, str]]) -> list[str]:
    problems: list[str] = []
    match = QUESTION_ID.fullmatch(question.id)
    if match is None or match.group(1) != question.conversation:
        problems.append(f"{question.id}: id must look like c<conversation>-NNN")
    if question.id in seen_ids:
        problems.append(f"{question.id}: duplicate id")
    seen_ids.add(question.id)
    key = (question.conversation, question.question.casefold())
    if key in seen_questions:
        problems.append(f"{question.id}: the same question appears twice")
    seen_questions.add(key)
    if question.category not in CATEGORY_SHARES:
        problems.append(f"{question.id}: unknown category {question.category!r}")
    if not question.evidence:
        problems.append(f"{question.id}: no evidence turns")
    if len(set(question.evidence)) != len(question.evidence):
        problems.append(f"{question.id}: an evidence turn is listed twice")
    malformed = [dia_id for dia_id in question.evidence if DIA_ID.fullmatch(dia_id) is None]
    if malformed:
        problems.append(f"{question.id}: malformed dia_ids {malformed}")
    sessions = {match.group(1) for match in map(DIA_ID.fullmatch, question.evidence) if match is not None}
    if question.category == "multi-hop" and len(sessions) < MIN_MULTI_HOP_SESSIONS:
        problems.append(
            f"{question.id}: a multi-hop question needs turns of at least {MIN_MULTI_HOP_SESSIONS} sessions"
        )
    if question.category == "open-domain" and not INFERENCE.search(question.question):
        problems.append(f"{question.id}: an open-domain question must ask for an inference (would, likely …)")
    if question.category == "temporal" and not YEAR.search(question.question + " " + question.answer):
        problems.append(f"{question.id}: a temporal question or its answer must name the year")
    return problems


def _check_counts(questions: Sequence[Question]) -> list[str]:
    problems: list[str] = []
    total = len(questions)
    if total < MIN_QUESTIONS:
        problems.append(f"only {total} questions; at least {MIN_QUESTIONS} are needed")
    per_conversation = Counter(question.conversation for question in questions)
    for conversation, count in sorted(per_conversation.items()):
        if count < MIN_PER_CONVERSATION:
            problems.append(
                f"conversation {conversation} has {count} questions; at least {MIN_PER_CONVERSATION}"
            )
    per_category = Counter(question.category for question in questions)
    for category, target in CATEGORY_SHARES.items():
        share = per_category[category] / total if total else 0.0
        if abs(share - target) > SHARE_TOLERANCE:
            problems.append(f"{category} is {share:.0%} of the set; the target is {target:.0%}")
    return problems


def _check_split(question_set: QuestionSet) -> list[str]:
    """The held-out part: whole conversations of the set, enough of them, every category in both parts."""
    problems: list[str] = []
    conversations = {question.conversation for question in question_set.questions}
    unknown = sorted(question_set.held_out - conversations)
    if unknown:
        problems.append(f"held-out conversations {unknown} have no questions")
    if len(question_set.held_out & conversations) < MIN_HELD_OUT_CONVERSATIONS:
        problems.append(f"at least {MIN_HELD_OUT_CONVERSATIONS} conversations must be held out")
    held_out = question_set.part(held_out=True)
    total = len(question_set.questions)
    if total and len(held_out) / total < MIN_HELD_OUT_SHARE:
        problems.append(
            f"the held-out part is {len(held_out) / total:.0%} of the set; at least {MIN_HELD_OUT_SHARE:.0%}"
        )
    for name, part in (("held-out", held_out), ("tuned", question_set.part(held_out=False))):
        absent = sorted(set(CATEGORY_SHARES) - {question.category for question in part})
        if part and absent:
            problems.append(f"the {name} part has no {', '.join(absent)} questions")
    return problems


def summary(question_set: QuestionSet) -> str:
    """A markdown table: questions per conversation (rows, held-out ones marked) and category (columns)."""
    questions = question_set.questions
    categories = list(CATEGORY_SHARES)
    counts = Counter((question.conversation, question.category) for question in questions)
    conversations = sorted({question.conversation for question in questions}, key=int)
    lines = [
        "| conversation | " + " | ".join(categories) + " | total |",
        "|---" * (len(categories) + 2) + "|",
    ]
    for conversation in conversations:
        row = [counts[(conversation, category)] for category in categories]
        name = f"{conversation} (held out)" if conversation in question_set.held_out else conversation
        lines.append(f"| {name} | " + " | ".join(map(str, row)) + f" | {sum(row)} |")
    totals = [
        sum(counts[(conversation, category)] for conversation in conversations) for category in categories
    ]
    lines.append("| all | " + " | ".join(map(str, totals)) + f" | {sum(totals)} |")
    return "\n".join(lines)


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--questions", type=Path, default=QUESTIONS_FILE)
    parser.add_argument("--data", type=Path, default=None, help="the LoCoMo folder (default: found upwards)")
    args = parser.parse_args(argv)
    data_dir = args.data or locomo_dir()
    question_set, problems = load_set(args.questions)
    if data_dir is None or not data_dir.is_dir():
        problems.append("LoCoMo conversations not found; pass --data or set CHORUS_LOCOMO_DIR")
        data_dir = None
    problems.extend(check(question_set, data_dir))
    print(summary(question_set))
    for problem in problems:
        print(f"problem: {problem}", file=sys.stderr)
    print(f"{len(question_set.questions)} questions, {len(problems)} problems", file=sys.stderr)
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
