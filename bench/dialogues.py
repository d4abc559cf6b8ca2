"""The development conversations of the recall benchmark (`bench/data/dev/`), read as LoCoMo turns.

Recall is tuned on these, never on LoCoMo (which stays held out). A conversation is a text
file: `speakers: A, B`, then sessions, each opened by `## <time> on <day> <month>, <year>`
and followed by `Name: text` turns; a turn may end with `{tag}`, which the questions name as
their evidence. Lines starting with `#` (one hash) are comments. Turns get LoCoMo's ids
(`D<session>:<turn>`), so the benchmark scores them as it scores LoCoMo's.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any

DEV_DIR = Path(__file__).resolve().parent / "data" / "dev"
_TAG = re.compile(r"\s*\{(?P<tag>[\w-]+)\}\s*$")
_TURN = re.compile(r"^(?P<speaker>[^:#][^:]*):\s*(?P<text>.+)$")


@dataclass(frozen=True)
class DialogueTurn:
    dia_id: str
    speaker: str
    text: str
    session_date: str  # as LoCoMo writes it: "7:05 pm on 4 March, 2022"
    tag: str | None


def read_dialogue(path: Path) -> list[DialogueTurn]:
    """Every turn of a development conversation, in order."""
    turns: list[DialogueTurn] = []
    session, number, date = 0, 0, ""
    speakers: set[str] = set()
    for line_number, raw in enumerate(path.read_text(encoding="utf-8").splitlines(), 1):
        line = raw.strip()
        if not line or (line.startswith("#") and not line.startswith("## ")):
            continue
        if line.startswith("speakers:"):
            speakers = {name.strip() for name in line.removeprefix("speakers:").split(",")}
            continue
        if line.startswith("## "):
            session, number, date = session + 1, 0, line.removeprefix("## ").strip()
            continue
        match = _TURN.match(line)
        if match is None or session == 0 or match["speaker"] not in speakers:
            raise ValueError(f"{path.name}:{line_number}: not a turn of a session: {line!r}")
        text, tag = match["text"], None
        if found := _TAG.search(text):
            text, tag = text[: found.start()], found["tag"]
        number += 1
        turns.append(DialogueTurn(f"D{session}:{number}", match["speaker"], text, date, tag))
    return turns


def dev_questions(directory: Path = DEV_DIR) -> list[dict[str, Any]]:
    """The development questions, their evidence tags resolved to turn ids."""
    questions = json.loads((directory / "questions.json").read_text(encoding="utf-8"))["questions"]
    ids = {
        path.stem: {turn.tag: turn.dia_id for turn in read_dialogue(path) if turn.tag}
        for path in directory.glob("*.txt")
    }
    resolved = []
    for question in questions:
        tags = ids[question["conversation"]]
        missing = [tag for tag in question["evidence"] if tag not in tags]
        if missing:
            raise ValueError(f"{question['id']}: no turn tagged {missing}")
        resolved.append({**question, "evidence": [tags[tag] for tag in question["evidence"]]})
    return resolved
