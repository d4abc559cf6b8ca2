"""A turn's rounds: call the model → store its calls → run them → store the results → repeat.

A turn calls the model, runs the tools it asked for (`bot.turns.round_calls`), and calls
it again, up to `tools.max_steps` rounds; then the model answers once more without tools.
The same call (tool and arguments) made `REPEAT_LIMIT` times in one turn also ends the
rounds: a model caught in a loop gets no further by asking again. The engine
(`bot.turns.engine`) runs the rounds and stores the reply they leave (`TurnRounds`).
"""

from __future__ import annotations

import json
import logging
from collections import Counter
from collections.abc import AsyncGenerator, Awaitable, Callable, Iterable, Mapping
from contextlib import aclosing
from dataclasses import dataclass, field
from typing import Literal

from bot.config import Settings
from bot.errors import ChorusError, ContextOverflowError
from bot.metrics import SHED_PARTS, TOOL_STEPS
from bot.providers.base import (
    ChatProvider,
    ChatRequest,
    ProviderBlocks,
    ReasoningDelta,
    Served,
    TextDelta,
    ToolCall,
    Usage,
    shown_model,
    tool_name,
)
from bot.storage.boundary import boundary_for
from bot.storage.context_records import ContextView
from bot.storage.message_append import NewMessage
from bot.storage.models import ChatSession
from bot.storage.stores import Stores
from bot.tools.base import Tool
from bot.tools.offer import schemas_of
from bot.turns.assembly import ContextAssembler
from bot.turns.events import Delta, Thinking, TurnEvent
from bot.turns.plan import TurnPlan
from bot.turns.prefixes import PrefixWatch, RequestShape
from bot.turns.round_calls import PendingCall, RoundCalls
from bot.windows import WindowInfo
from transcript import Context, StoredToolCall, TranscriptRow, count_call_tokens, count_tokens

log = logging.getLogger(__name__)

# Called when the provider rejects a context as too large; returns True when it
# freed room (collapsed a range), so the rounds rebuild and retry.
OverflowHandler = Callable[[ChatSession, Context], Awaitable[bool]]

REPEAT_LIMIT = 3

EndReason = Literal["steps", "repeated"]
END_NOTES: dict[EndReason, str] = {
    "steps": "[Stopped using tools after {steps} steps.]",
    "repeated": "[Stopped using tools: the same call was repeated {repeats} times.]",
}


@dataclass
class ModelAnswer:
    """One model call's answer as it streamed: its text, its tool calls, and the window it saw."""

    text: list[str] = field(default_factory=list)
    reasoning: list[str] = field(default_factory=list)
    # Thinking is streaming now (a `Thinking` event was sent since the last text).
    thinking: bool = False
    reasoning_stored: bool = False
    calls: list[ToolCall] = field(default_factory=list)
    window_from_seq: int | None = None
    # What the call's context was built from: the next round extends it with the rows
    # the round stored (`StoredMessage.row`, in the order they were stored).
    view: ContextView | None = None
    stored: list[TranscriptRow | None] = field(default_factory=list)
    # The answer in its provider's own blocks, stored with it for the provider to replay.
    provider_blocks: dict[str, object] | None = None

    @property
    def joined(self) -> str:
        return "".join(self.text)


@dataclass(frozen=True)
class UnansweredCalls:
    """What a recovered turn finds: its rounds so far, and the last round's calls without a result."""

    steps: int
    call_seq: int
    calls: list[ToolCall]


class Overflowed(ChorusError):
    """The context stayed too large for the model after every fold."""


class QuestionTooLarge(ChorusError):
    """The person's message cannot fit the model's window even alone."""

    def __init__(self, message: str) -> None:
        super().__init__(message)
        self.message = message


@dataclass
class TurnRounds:
    """What a turn's rounds leave for its reply: the last call's answer, the tools, the limits."""

    answer: ModelAnswer = field(default_factory=ModelAnswer)
    tools: dict[str, Tool] = field(default_factory=dict)
    limits: ToolRounds | None = None

    def note(self) -> str | None:
        """What the final answer says about rounds that ended early; None when they did not."""
        return self.limits.note() if self.limits is not None else None


class RoundRunner:
    """Runs a turn's model calls and tool rounds, storing each call's thinking, calls and results."""

    def __init__(
        self,
        *,
        settings: Settings,
        stores: Stores,
        provider: ChatProvider,
        assembler: ContextAssembler,
        overflow_handler: OverflowHandler | None,
        calls: RoundCalls,
        prefixes: PrefixWatch | None = None,
    ) -> None:
        self.settings = settings
        self.stores = stores
        # Every store call of a turn goes through here: the event loop never waits on SQL.
        self.db = boundary_for(stores.database)
        self.provider = provider
        self.assembler = assembler
        # Frees room when the model rejects a context as too large; None: the turn fails at once.
        self.overflow_handler = overflow_handler
        self.calls = calls
        # Compares each call with the conversation's previous one (prompt prefix breaks).
        self.prefixes = prefixes if prefixes is not None else PrefixWatch()

    async def run(self, plan: TurnPlan, rounds: TurnRounds) -> AsyncGenerator[TurnEvent, None]:
        """The turn's rounds: call the model → store its calls → run them → store the results → repeat.

        The rounds end when the model answers in text, or after `tools.max_steps` (or a call
        repeated `REPEAT_LIMIT` times): then it answers once more without tools, and the
        answer says why. A turn a restart recovers first runs the calls its rows leave
        unanswered, never one whose result is stored. `rounds` holds, as they go, the answer
        the engine stores as the reply (or keeps, cut, when the rounds fail or are closed).
        """
        session = plan.session
        offered = self.assembler.offered_tools(session, plan.persona, plan.audience)
        tools, plan.asking = offered.tools, offered.asking
        rounds.tools = tools
        limits = rounds.limits = ToolRounds(self.settings.tools.max_steps)
        unanswered = await self._unanswered_calls(plan) if plan.resumed else None
        if unanswered is not None:
            limits.steps = unanswered.steps
            leftover = self.calls.run(
                plan, PendingCall(None, unanswered.call_seq), unanswered.calls, tools, None, []
            )
            async with aclosing(leftover) as events:
                async for event in events:
                    yield event
            if plan.handed_over:
                return
        round_rows: list[TranscriptRow | None] = []
        while True:
            answer = rounds.answer = ModelAnswer(view=rounds.answer.view, stored=round_rows)
            offering = tools if limits.may_call_tools else {}
            async with aclosing(self._call_model(plan, tools, answer, final=not offering)) as events:
                async for event in events:
                    yield event
            await self.store_reasoning(plan, answer)
            if plan.running.stopped or not answer.calls or not offering:
                break
            round_rows = []
            call_message = self._call_message(plan, answer)
            if only_reads(answer.calls, offering) and plan.asking.isdisjoint(
                call.name for call in answer.calls
            ):
                # Nothing a read changes outlives a crash, so its call may be stored
                # together with its first result (one write fewer a round): recovery
                # from a crash in between asks the model again, as before the call.
                pending = PendingCall(call_message)
            else:
                call_row = await self.db.run(self.stores.messages.append, session.id, call_message)
                round_rows.append(call_row.row)
                pending = PendingCall(None, call_row.seq)
            # aclosing: a lane that stops listening stores the round's results before the reply.
            calls = self.calls.run(plan, pending, answer.calls, offering, answer.window_from_seq, round_rows)
            async with aclosing(calls) as events:
                async for event in events:
                    yield event
            limits.record(answer.calls)
            if plan.handed_over:
                # Another process ran a call of this round and goes on with the turn from its result.
                rounds.answer = ModelAnswer()
                break
            if plan.running.stopped:
                rounds.answer = ModelAnswer()
                break
        TOOL_STEPS.observe(limits.steps)

    async def _call_model(
        self, plan: TurnPlan, tools: dict[str, Tool], answer: ModelAnswer, *, final: bool
    ) -> AsyncGenerator[TurnEvent, None]:
        """One model call, its text streamed as `Delta`s and the rest kept in `answer`.

        `final` asks for an answer in text: the tools' schemas still go (the history holds
        their calls) but `tool_choice` is "none". A context the provider rejects as too
        large is folded and built again, a bounded number of times. `answer.view`, the
        previous round's view, is extended with the rows the round stored (`answer.stored`);
        a rebuild after an overflow reads the context afresh.
        """
        session, persona = plan.session, plan.persona
        model = self.assembler.conversation_model(session, persona)
        schemas = schemas_of(tools)
        for attempt in range(self.settings.context.overflow_retries + 1):
            # After an overflow the fold changed the records (here or, racing it, in another
            # process), or the window was learned: the context is read afresh.
            earlier = answer.view if attempt == 0 else None
            answer.view, context = await self.assembler.assemble_view(
                session, persona, tools=schemas, earlier=earlier, appended=answer.stored
            )
            window = self.assembler.windows.info(model.model)
            if context.stats.question_excess_tokens > 0:
                raise QuestionTooLarge(too_large_message(context, window))
            note_shed(session.id, model.model, context)
            # A tight window may have left some schemas out: the request offers the rest.
            offered = tuple(schema for schema in schemas if tool_name(schema) in context.tools)
            request = ChatRequest(
                messages=context.messages,
                model=model.model,
                temperature=persona.temperature,
                top_p=persona.top_p,
                max_tokens=window.reply_reserve,
                persona_id=persona.id,
                persona_name=persona.name,
                prompt_tokens=context.stats.total_tokens,
                tools=offered,
                tool_choice="none" if final and offered else None,
                thinking=session.thinking if model.thinking else None,
            )
            window_from_seq = context.stats.kept_seqs[0] if context.stats.kept_seqs else None
            self.prefixes.observe(session.id, request, RequestShape.of(request, answer.view, window_from_seq))
            # What the reply records as its model, unless the provider names another (`Served`).
            plan.model = shown_model(self.provider, model.model)
            try:
                async with aclosing(plan.running.pieces(self.provider.stream(request))) as events:
                    async for event in events:
                        if isinstance(event, TextDelta):
                            answer.text.append(event.text)
                            answer.thinking = False
                            yield Delta(event.text, persona.id, persona.name, session_id=session.id)
                        elif isinstance(event, ReasoningDelta):
                            if not answer.thinking:
                                answer.thinking = True
                                yield Thinking(persona.id, persona.name, session_id=session.id)
                            answer.reasoning.append(event.text)
                        elif isinstance(event, ToolCall):
                            answer.calls.append(event)
                        elif isinstance(event, Served):
                            plan.model = event.model
                        elif isinstance(event, ProviderBlocks):
                            answer.provider_blocks = {"provider": event.provider, "blocks": event.blocks}
                        elif isinstance(event, Usage):
                            plan.usage = event if plan.usage is None else plan.usage + event
                answer.window_from_seq = window_from_seq
                return
            except ContextOverflowError:
                if attempt == self.settings.context.overflow_retries:
                    raise Overflowed() from None
                # The provider learned the window the error named: when the request was
                # larger than that window's budget, a rebuild fits it without folding.
                if context.stats.total_tokens > self.assembler.windows.info(model.model).budget_tokens:
                    continue
                recovered = self.overflow_handler is not None and await self.overflow_handler(
                    session, context
                )
                if not recovered:
                    raise Overflowed() from None

    async def store_reasoning(self, plan: TurnPlan, answer: ModelAnswer) -> None:
        """The call's thinking, stored (once) as its own row before what the call answered.

        A `reasoning` row is an event: never the reply's text, never in the model's history.
        """
        thinking = "".join(answer.reasoning)
        if answer.reasoning_stored or not thinking.strip():
            return
        answer.reasoning_stored = True
        plan.thought.append(thinking)
        message = NewMessage(
            role="system",
            kind="reasoning",
            content=thinking,
            token_count=count_tokens(thinking),
            persona_id=plan.persona.id,
            sender_name=plan.persona.name,
            reply_to_id=plan.user_message_id,
        )
        await self.db.run(self.stores.messages.append, plan.session.id, message)

    def _call_message(self, plan: TurnPlan, answer: ModelAnswer) -> NewMessage:
        """The model's words and calls of one round, as they are stored."""
        text = answer.joined
        calls = tuple(StoredToolCall(call.id, call.name, call.arguments) for call in answer.calls)
        return NewMessage(
            role="assistant",
            content=text,
            token_count=count_tokens(text) + count_call_tokens(calls),
            persona_id=plan.persona.id,
            sender_name=plan.persona.name,
            reply_to_id=plan.user_message_id,
            kind="tool_call",
            tool_calls=calls,
            provider_blocks=answer.provider_blocks,
        )

    async def _unanswered_calls(self, plan: TurnPlan) -> UnansweredCalls | None:
        """The calls of the turn's last stored round that have no stored result, and its step count."""
        rows = await self.db.run(self.stores.messages.turn_rows, plan.session.id, plan.user_message_id)
        call_rows = [row for row in rows if row.tool_calls]
        if not call_rows:
            return None
        last = call_rows[-1]
        answered = {row.tool_call_id for row in rows if row.role == "tool"}
        missing = [
            ToolCall(call.id, call.name, call.arguments)
            for call in last.tool_calls
            if call.id not in answered
        ]
        return UnansweredCalls(steps=len(call_rows), call_seq=last.seq, calls=missing)


def too_large_message(context: Context, window: WindowInfo) -> str:
    """What a person is told when their message alone does not fit the model's window."""
    room = context.stats.question_tokens - context.stats.question_excess_tokens
    if room <= 0:
        # Not the person's fault: the instructions alone leave no room in this window.
        return (
            f"This model's window ({window.window:,} tokens) is too small for this persona's "
            "instructions and a reply, so no message can be answered. Your message is saved; "
            "the operator can choose a larger model or a shorter system prompt."
        )
    return (
        f"Your message is too long for this model: about {context.stats.question_tokens:,} tokens, "
        f"and the model's window is {window.window:,} tokens, which leaves room for about "
        f"{room:,} after its instructions and its reply. Your message is saved; please send "
        "a shorter one or split it into parts."
    )


def note_shed(session_id: str, model: str, context: Context) -> None:
    """Logs and counts what a tight window left out of this request (also in /context)."""
    if not context.stats.shed:
        return
    log.info(
        "The window of %s is tight: left out of session %s's request: %s",
        model,
        session_id,
        "; ".join(str(note) for note in context.stats.shed),
    )
    for note in context.stats.shed:
        SHED_PARTS.labels(note.part).inc()


@dataclass
class ToolRounds:
    max_steps: int
    steps: int = 0
    ended: EndReason | None = None
    _calls: Counter[tuple[str, str]] = field(default_factory=Counter)

    @property
    def may_call_tools(self) -> bool:
        return self.ended is None

    def record(self, calls: Iterable[ToolCall]) -> None:
        """One round's calls were made: count the step and the repeats."""
        self.steps += 1
        for call in calls:
            key = (call.name, canonical_arguments(call.arguments))
            self._calls[key] += 1
            if self._calls[key] >= REPEAT_LIMIT:
                self.ended = "repeated"
        if self.ended is None and self.steps >= self.max_steps:
            self.ended = "steps"

    def note(self) -> str | None:
        """What the final answer says about rounds that ended early; None when they did not."""
        if self.ended is None:
            return None
        return END_NOTES[self.ended].format(steps=self.steps, repeats=REPEAT_LIMIT)


def only_reads(calls: Iterable[ToolCall], tools: Mapping[str, Tool]) -> bool:
    """Every call names an offered tool that only reads: running it again changes nothing."""
    return all(call.name in tools and tools[call.name].read_only for call in calls)


def canonical_arguments(arguments: str) -> str:
    """The arguments with key order and spacing ignored, so equal calls compare equal."""
    try:
        return json.dumps(json.loads(arguments), sort_keys=True, ensure_ascii=False)
    except ValueError:
        return arguments.strip()
