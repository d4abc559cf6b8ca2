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

# Target share of each category; a set may drift from it by SHARE_TOLERANCE either way.
CATEGORY_SHARES: dict[str, float] = {
    "single-hop": 0.30,
    "multi-hop": 0.20,
    "temporal": 0.20,
    "open-domain": 0.10,
    "paraphrase": 0.20,
}
SHARE_TOLERANCE = 0.07
MIN_QUESTIONS = 150
MIN_CONVERSATIONS = 3
MIN_PER_CONVERSATION = 50
# A multi-hop question joins facts from more than one turn by definition.
MIN_MULTI_HOP_EVIDENCE = 2

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


def load_questions(path: Path = QUESTIONS_FILE) -> tuple[list[Question], list[str]]:
    """Parse the question file; malformed entries are reported, not raised."""
    raw = json.loads(path.read_text(encoding="utf-8"))
    entries = raw.get("questions") if isinstance(raw, dict) else None
    if not isinstance(entries, list):
        return [], [f"{path.name}: expected an object with a 'questions' list"]
    questions: list[Question] = []
    problems: list[str] = []
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
    return questions, problems


def conversation_turns(path: Path) -> set[str]:
    """Every dia_id of one LoCoMo conversation file."""
    data = json.loads(path.read_text(encoding="utf-8"))
    turns: set[str] = set()
    index = 1
    while f"session_{index}" in data:
        turns.update(turn["dia_id"] for turn in data[f"session_{index}"] or [])
        index += 1
    return turns


def check(questions: Sequence[Question], data_dir: Path | None) -> list[str]:
    """Every problem with the set; empty when it is sound. Evidence is checked when data_dir is given."""
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
    problems.extend(_check_counts(questions))
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
    if question.category == "multi-hop" and len(question.evidence) < MIN_MULTI_HOP_EVIDENCE:
        problems.append(f"{question.id}: a multi-hop question needs at least {MIN_MULTI_HOP_EVIDENCE} turns")
    if question.category == "temporal" and not YEAR.search(question.question + " " + question.answer):
        problems.append(f"{question.id}: a temporal question or its answer must name the year")
    return problems


def _check_counts(questions: Sequence[Question]) -> list[str]:
    problems: list[str] = []
    total = len(questions)
    if total < MIN_QUESTIONS:
        problems.append(f"only {total} questions; at least {MIN_QUESTIONS} are needed")
    per_conversation = Counter(question.conversation for question in questions)
    if len(per_conversation) < MIN_CONVERSATIONS:
        problems.append(
            f"questions cover {len(per_conversation)} conversations; at least {MIN_CONVERSATIONS}"
        )
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


def summary(questions: Sequence[Question]) -> str:
    """A markdown table: questions per conversation (rows) and category (columns)."""
    categories = list(CATEGORY_SHARES)
    counts = Counter((question.conversation, question.category) for question in questions)
    conversations = sorted({question.conversation for question in questions}, key=int)
    lines = [
        "| conversation | " + " | ".join(categories) + " | total |",
        "|---" * (len(categories) + 2) + "|",
    ]
    for conversation in conversations:
        row = [counts[(conversation, category)] for category in categories]
        lines.append(f"| {conversation} | " + " | ".join(map(str, row)) + f" | {sum(row)} |")
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
    questions, problems = load_questions(args.questions)
    if data_dir is None or not data_dir.is_dir():
        problems.append("LoCoMo conversations not found; pass --data or set CHORUS_LOCOMO_DIR")
        data_dir = None
    problems.extend(check(questions, data_dir))
    print(summary(questions))
    for problem in problems:
        print(f"problem: {problem}", file=sys.stderr)
    print(f"{len(questions)} questions, {len(problems)} problems", file=sys.stderr)
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
