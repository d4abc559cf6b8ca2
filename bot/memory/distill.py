"""Distillers: filtered transcript text → memory items (decision, constraint, conclusion, fact).

`RuleDistiller` works offline: it scores each sentence on decision, constraint,
conclusion and personal-fact cues, as the memory service behind the seed does.
`ModelDistiller` asks the configured model for JSON and falls back to the rules
when the answer is not usable; a failed call raises, so the cursor stays put. The
same call says, for each item, whom it is about, who said it, the messages it came
from and which already remembered items it replaces (`KnownItem`s listed after the
excerpt): one request per chunk, nothing asked twice. Each request starts with the
conversation's last request and its reply (`transcript.after_turn`), when the job has it and
the window holds both, so the server serves it from its cache; the instructions, the
excerpt and the remembered items follow in one user message, last.
"""

from __future__ import annotations

import asyncio
import json
import logging
import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any, Protocol

from bot.errors import ContextOverflowError
from bot.memory.filters import mask_paths
from bot.memory.items import BASE_IMPORTANCE, KINDS, DistilledItem, MemoryKind, clamp_importance
from bot.memory.tags import CONSTRAINT_WORDS, DECISION_WORDS, is_process_narration
from bot.providers.after_turn import PrefixOnce, SharedPrefix, after_turn_request
from bot.providers.base import ChatProvider
from bot.search_terms import words
from bot.storage.models import ChatSession
from bot.windows import ModelWindows
from transcript import count_tokens, truncate_to_tokens
from transcript.after_turn import after_turn_messages

log = logging.getLogger(__name__)

MEMORY_PURPOSE = "memory"

CONCLUSION_WORDS = re.compile(
    r"结论|因此|所以|说明|表明|发现|原来|已确认|已验证|已修复"
    r"|\bturn(?:s|ed) out\b|\bfound (?:out|that)\b|\brealized?\b|\blearned\b|\bthat's why\b"
    r"|\bwhich means\b|\bthe reason\b|\bin the end\b|\bconclusion\b|\bconfirmed\b|\bfixed\b"
    r"|\bworks now\b|\bthe (?:problem|issue|cause) (?:is|was)\b|\btherefore\b",
    re.I,
)
FACT_WORDS = re.compile(
    r"我是|我的|我在|我有|我喜欢|我住|我叫"
    r"|\bI am\b|\bI'm\b|\bI've\b|\bI have\b|\bI had\b|\bmy\b|\bI (?:work|live|love|like|hate|prefer"
    r"|started|went|moved|got|joined|bought|made|painted|adopted|studied|finished|signed)\b"
    r"|\bwe (?:went|moved|got|adopted|bought|started)\b|\byears old\b|\bname is\b|\bbirthday\b",
    re.I,
)
_SENTENCE_END = re.compile(r"(?<=[.!?。！？；;])\s*|\n+")
# Numbers, names inside a sentence, file names and paths.
_DETAIL = re.compile(r"\d|(?<=\s)[A-Z][\w-]+|[\w-]+\.[a-z]{2,4}\b|<path>")
MIN_WORDS = 4


@dataclass(frozen=True)
class SourceBlock:
    """One filtered message handed to a distiller."""

    seq: int
    speaker: str | None  # named in group sessions, None in private ones
    text: str
    # Whether a person said it (not the assistant): only a person is an item's `said_by`.
    from_person: bool = True


@dataclass(frozen=True)
class KnownItem:
    """An item the owner has now, offered to the model so a new item can say it replaces it."""

    id: int
    text: str


# The model a session's conversation speaks with.
ModelFor = Callable[[ChatSession], str]


class Distiller(Protocol):
    name: str

    async def distill(
        self,
        blocks: Sequence[SourceBlock],
        max_items: int,
        session: ChatSession | None = None,
        known: Sequence[KnownItem] = (),
        prefix: PrefixOnce | None = None,
    ) -> list[DistilledItem]:
        """Items from `blocks` of `session` (a model distiller asks the conversation's model);
        `known` are current items a new one may replace (the rules find those by slot);
        `prefix` the conversation's last request, which a model's requests start with."""
        ...


class RuleDistiller:
    """Offline sentence scoring; deterministic, so tests and the benchmark use it."""

    name = "rules"

    async def distill(
        self,
        blocks: Sequence[SourceBlock],
        max_items: int,
        session: ChatSession | None = None,
        known: Sequence[KnownItem] = (),
        prefix: PrefixOnce | None = None,
    ) -> list[DistilledItem]:
        # Sentence scoring is CPU work (regular expressions over the chunk): a worker thread, not the loop.
        return await asyncio.to_thread(distill_by_rules, blocks, max_items)


def distill_by_rules(blocks: Sequence[SourceBlock], max_items: int) -> list[DistilledItem]:
    scored: list[tuple[int, int, DistilledItem]] = []
    for block in blocks:
        for sentence in split_sentences(block.text):
            classified = classify_sentence(sentence)
            if classified is None:
                continue
            kind, importance = classified
            content = f"{block.speaker}: {sentence}" if block.speaker else sentence
            # What a person says in the first person is about them; what the assistant says
            # is about no one in particular.
            speaker = block.speaker if block.from_person else None
            item = DistilledItem(
                kind, content, importance, "rules", block.seq, about=speaker, said_by=speaker
            )
            scored.append((importance, len(scored), item))
    # The most important first; ties keep transcript order. Then back to transcript order.
    best = sorted(scored, key=lambda entry: (-entry[0], entry[1]))[:max_items]
    return [item for _, _, item in sorted(best, key=lambda entry: entry[1])]


def split_sentences(text: str) -> list[str]:
    return [part.strip(" -*•\t") for part in _SENTENCE_END.split(text) if part.strip(" -*•\t")]


def classify_sentence(sentence: str) -> tuple[MemoryKind, int] | None:
    """(kind, importance) of a sentence worth keeping, or None."""
    if sentence.endswith(("?", "？")):
        return None
    masked = mask_paths(sentence)
    content_words = words(masked)
    if len(content_words) < MIN_WORDS:
        return None
    cues: dict[MemoryKind, int] = {
        "constraint": len(CONSTRAINT_WORDS.findall(masked)),
        "decision": len(DECISION_WORDS.findall(masked)),
        "conclusion": len(CONCLUSION_WORDS.findall(masked)),
        "fact": len(FACT_WORDS.findall(masked)),
    }
    # Priority on ties follows KINDS: a constraint outranks a decision, and so on.
    kind = max(KINDS, key=lambda candidate: (cues[candidate], -KINDS.index(candidate)))
    if cues[kind] == 0:
        return None
    if kind == "conclusion" and is_process_narration(masked):
        kind = "fact"
    importance = BASE_IMPORTANCE[kind]
    if _DETAIL.search(masked):
        importance += 1  # numbers, names and identifiers are what summaries lose
    if sum(cues.values()) >= 3:
        importance += 1
    return kind, clamp_importance(importance)


MODEL_INSTRUCTIONS = """\
You extract durable long-term memory from a conversation excerpt.
Keep only what stays true and matters later: decisions taken, constraints and
preferences, conclusions reached, and stable facts about the people. Skip
greetings, questions, plans that were not settled, and anything inside code.
Each excerpt line is "[seq] Speaker: text". Write each item as one self-contained
sentence that names the person it is about, and say whom it is about, who said
it, and the seqs of the lines it comes from.
Items already remembered may follow the excerpt as "#id text". When a new item
updates or contradicts one of them (someone moved, changed jobs, a date moved),
put that id in "replaces": the new item holds from now on, the old one becomes
history. Leave "replaces" empty otherwise.
Answer with JSON only, no prose:
{"items": [{"kind": "decision|constraint|conclusion|fact",
            "content": "one self-contained sentence", "importance": 1-10,
            "about": "name", "said_by": "name", "seqs": [first, last],
            "replaces": [id, ...]}]}
Return {"items": []} when there is nothing worth remembering. At most %d items."""

# Heads the list of remembered items that follows the excerpt.
KNOWN_ITEMS_HEADING = "Already remembered:"


# Room for the two messages' framing and the excerpt's line breaks, in tokens.
EXCERPT_OVERHEAD_TOKENS = 16


class ModelDistiller:
    """Asks the configured model; provider errors propagate so nothing is lost.

    An excerpt larger than the model's window goes in several calls, each fitted to it.
    """

    name = "model"

    def __init__(
        self, provider: ChatProvider, model: str, windows: ModelWindows, model_for: ModelFor | None = None
    ) -> None:
        self.provider = provider
        self.model = model
        self.windows = windows
        # The conversation's model (its /model choice or persona's); None: always `model`.
        self.model_for = model_for

    async def distill(
        self,
        blocks: Sequence[SourceBlock],
        max_items: int,
        session: ChatSession | None = None,
        known: Sequence[KnownItem] = (),
        prefix: PrefixOnce | None = None,
    ) -> list[DistilledItem]:
        instructions = MODEL_INSTRUCTIONS % max_items
        model = self.model_for(session) if self.model_for is not None and session is not None else self.model
        window = await self.windows.refresh(model)
        remembered = known_lines(known)
        room = (
            window.fitted_window
            - window.reply_reserve
            - count_tokens(instructions)
            - count_tokens(remembered)
            - EXCERPT_OVERHEAD_TOKENS
        )
        shared = await prefix.get() if prefix is not None else None
        if shared is not None and not shared.leaves(room, 0):
            shared = None  # the conversation leaves the excerpt too little room: it goes alone
        if shared is not None:
            room -= shared.tokens
        items: list[DistilledItem] = []
        for chunk in excerpt_chunks(blocks, max(room, 1)):
            instruction = distillation_instruction(instructions, chunk.lines, remembered)
            try:
                answer = await self._ask(model, window.reply_reserve, instruction, shared)
            except ContextOverflowError:
                if shared is None:
                    raise
                # The conversation and the excerpt together did not fit after all: the excerpt alone.
                answer = await self._ask(model, window.reply_reserve, instruction, None)
            # Parsing (and the rules, should the answer be unusable) is CPU work: a worker thread.
            items += await asyncio.to_thread(items_from_answer, answer, chunk.blocks, max_items, known)
        if len(items) > max_items:
            # Several chunks found more than asked for: the most important are kept.
            items = sorted(items, key=lambda item: -item.importance)[:max_items]
        return items

    async def _ask(self, model: str, reply_tokens: int, instruction: str, shared: SharedPrefix | None) -> str:
        """One distillation call: the conversation's prefix (if any), then `instruction`."""
        request = after_turn_request(
            after_turn_messages(shared.messages if shared is not None else (), instruction),
            shared,
            model=model,
            temperature=0.0,
            max_tokens=reply_tokens,
            purpose=MEMORY_PURPOSE,
        )
        return await self.provider.complete(request)


# A remembered item is offered in at most this many characters.
KNOWN_ITEM_CHARS = 160


def known_lines(known: Sequence[KnownItem]) -> str:
    """The remembered items a new one may replace, as the excerpt's message lists them."""
    if not known:
        return ""
    lines = [f"#{item.id} {' '.join(item.text.split())[:KNOWN_ITEM_CHARS]}" for item in known]
    return "\n".join([KNOWN_ITEMS_HEADING, *lines])


def excerpt_message(lines: Sequence[str], remembered: str) -> str:
    """What a distillation reads: the excerpt, then the items it may replace."""
    excerpt = "\n".join(lines)
    return f"{excerpt}\n\n{remembered}" if remembered else excerpt


def distillation_instruction(instructions: str, lines: Sequence[str], remembered: str) -> str:
    """The last message of a distillation, a user's: the instructions, then what they apply to."""
    return f"{instructions}\n\n{excerpt_message(lines, remembered)}"


@dataclass(frozen=True)
class ExcerptChunk:
    """Consecutive blocks whose lines fit one distillation call."""

    blocks: tuple[SourceBlock, ...]
    lines: tuple[str, ...]


def excerpt_chunks(blocks: Sequence[SourceBlock], room_tokens: int) -> list[ExcerptChunk]:
    """`blocks` as excerpt lines in chunks of at most `room_tokens`; a longer line is cut to fit."""
    chunks: list[ExcerptChunk] = []
    chunk: list[SourceBlock] = []
    lines: list[str] = []
    used = 0
    for block in blocks:
        line = f"[{block.seq}] {block.speaker + ': ' if block.speaker else ''}{block.text}"
        tokens = count_tokens(line) + 1
        if tokens > room_tokens:
            line = truncate_to_tokens(line, room_tokens - 1)
            tokens = room_tokens
        if chunk and used + tokens > room_tokens:
            chunks.append(ExcerptChunk(tuple(chunk), tuple(lines)))
            chunk, lines, used = [], [], 0
        chunk.append(block)
        lines.append(line)
        used += tokens
    if chunk:
        chunks.append(ExcerptChunk(tuple(chunk), tuple(lines)))
    return chunks


def items_from_answer(
    answer: str, blocks: Sequence[SourceBlock], max_items: int, known: Sequence[KnownItem] = ()
) -> list[DistilledItem]:
    """The model's items, or the offline rules' when its answer is not usable JSON."""
    items = parse_model_items(answer, max_items, blocks, {item.id for item in known})
    if items is None:
        log.warning("memory distillation answer was not usable JSON; using the offline rules")
        return distill_by_rules(blocks, max_items)
    return items


_JSON_START = re.compile(r"[\[{]")


def parse_model_items(
    answer: str,
    max_items: int,
    blocks: Sequence[SourceBlock] = (),
    known_ids: set[int] | frozenset[int] = frozenset(),
) -> list[DistilledItem] | None:
    """Items from the model's JSON answer (fenced or bare); None when it is not JSON.

    An item's seqs are kept when they are lines of the excerpt (`blocks`), its speaker
    when it is one of the excerpt's, and the items it replaces when they were offered
    (`known_ids`): a model's slip never points at another message, person or item.
    """
    match = _JSON_START.search(answer)
    if match is None:
        return None
    try:
        parsed: Any = json.JSONDecoder().raw_decode(answer[match.start() :])[0]
    except ValueError:
        return None
    entries = parsed.get("items") if isinstance(parsed, dict) else parsed
    # A bare list of numbers is no answer: "[12] Alice: …" quoted back starts like JSON.
    if not isinstance(entries, list) or not all(isinstance(entry, dict) for entry in entries):
        return None
    items: list[DistilledItem] = []
    for entry in entries[:max_items]:
        content = str(entry.get("content", "")).strip()
        kind = str(entry.get("kind", "fact")).strip().lower()
        if not content:
            continue
        memory_kind: MemoryKind = kind if kind in KINDS else "fact"
        try:
            importance = int(entry.get("importance", BASE_IMPORTANCE[memory_kind]))
        except (TypeError, ValueError):
            importance = BASE_IMPORTANCE[memory_kind]
        first, last = _seqs(entry.get("seqs"), {block.seq for block in blocks})
        items.append(
            DistilledItem(
                memory_kind,
                content,
                clamp_importance(importance),
                "model",
                first,
                last,
                about=_name(entry.get("about")),
                said_by=_speaker(entry.get("said_by"), blocks),
                replaces=tuple(sorted({n for n in _ints(entry.get("replaces")) if n in known_ids})),
            )
        )
    return items


def _ints(value: Any) -> list[int]:
    """Whole numbers in a value of the answer: `12`, `"#12"`, or a list of them."""
    values = value if isinstance(value, list) else [value]
    found = []
    for entry in values:
        text = str(entry).lstrip("#") if isinstance(entry, int | str) and not isinstance(entry, bool) else ""
        if text.isdigit():
            found.append(int(text))
    return found


def _seqs(value: Any, excerpt: set[int]) -> tuple[int | None, int | None]:
    found = sorted(n for n in _ints(value) if n in excerpt)
    return (found[0], found[-1]) if found else (None, None)


def _name(value: Any) -> str | None:
    return (" ".join(value.split())[:256] or None) if isinstance(value, str) else None


def _speaker(value: Any, blocks: Sequence[SourceBlock]) -> str | None:
    """The excerpt's speaker the answer names (as the excerpt spells it), or None."""
    name = _name(value)
    people = {block.speaker.lower(): block.speaker for block in blocks if block.speaker and block.from_person}
    return people.get(name.lower()) if name else None
