"""One tool round's calls: run at once, each result stored as it comes, their progress shown.

The round runner (`bot.turns.rounds`) hands each round's calls here once the model asked
for them. A call that waits for a person's yes is asked (`bot.turns.approvals`) and runs
once, in whichever process claims it; what running calls report about their progress
becomes `ToolStep`s for the lanes' progress lines.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncGenerator, Iterable, Sequence
from dataclasses import dataclass, replace
from typing import TypeVar

from bot.config import Settings
from bot.providers.base import ToolCall
from bot.storage.approvals import NewApproval
from bot.storage.boundary import boundary_for
from bot.storage.message_append import NewMessage
from bot.storage.models import utcnow
from bot.storage.stores import Stores
from bot.tools.base import ReportProgress, Tool, ToolContext, ToolProgress, ToolResult
from bot.tools.runner import run_call
from bot.turns.approvals import POLL_SECONDS, RUN_ELSEWHERE_RESULT, Approvals, refused_result
from bot.turns.attachments import AttachmentStore
from bot.turns.events import ToolStatus, ToolStep, TurnEvent
from bot.turns.plan import TurnPlan
from bot.turns.tool_images import store_tool_images
from transcript import TranscriptRow, count_tokens
from transcript.rows import StoredToolCall

Result = TypeVar("Result")

# A call's main argument as people see it in a progress line.
SUMMARY_CHARS = 48
# The result of a call a stop (or shutdown) cut short: stored, so no call is left without one.
STOPPED_RESULT = ToolResult.error("Stopped before it finished: the turn was stopped.")
# How long past the tools' timeout a call run in another process may take to store its result.
RUN_ELSEWHERE_GRACE = 30.0


@dataclass
class PendingCall:
    """A round's call row: still to be stored (`message`), or stored already at `seq`."""

    message: NewMessage | None
    seq: int | None = None


class RoundCalls:
    """Runs the calls of one round and stores their results, beside the call row they answer."""

    def __init__(
        self,
        *,
        settings: Settings,
        stores: Stores,
        attachments: AttachmentStore,
        approvals: Approvals,
        instance_id: str,
    ) -> None:
        self.settings = settings
        self.stores = stores
        self.db = boundary_for(stores.database)
        self.attachments = attachments
        # Calls that wait for a person's yes or no (`tools.approve`), stored so a restart keeps them.
        self.approvals = approvals
        # Names this process as the one that ran an approved call.
        self.instance_id = instance_id

    async def run(
        self,
        plan: TurnPlan,
        pending: PendingCall,
        calls: Sequence[ToolCall],
        tools: dict[str, Tool],
        window_from_seq: int | None,
        stored_rows: list[TranscriptRow | None],
    ) -> AsyncGenerator[TurnEvent, None]:
        """Run one round's calls at once; each result is stored as it comes, before the next call.

        Each stored row is added to `stored_rows`, for the next model call's view; a call
        row not stored yet (`pending`) is stored with the first result.

        A stop (or the lane going away) cancels the calls still running; they are stored
        as stopped, so the transcript never holds a call without its result.
        """
        session = plan.session
        running: dict[asyncio.Task[ToolResult], ToolCall] = {}
        progress = RoundProgress()
        # Calls that did not run because no one (allowed to) said yes.
        refused: set[str] = set()
        for call in calls:
            context = ToolContext(
                session=session,
                persona_id=plan.persona.id,
                chat=plan.chat,
                group=session.kind == "group",
                call_id=call.id,
                seq=pending.seq,
                window_from_seq=window_from_seq,
                on_progress=progress.reporter(call.id),
            )
            task = asyncio.create_task(self._run_call(plan, call, tools, context, progress, refused))
            plan.running.track(task)
            running[task] = call
        stored: set[str] = set()
        try:
            for call in calls:
                yield _step(plan, call, "started")
            waiting: set[asyncio.Task[ToolResult]] = set(running)
            while waiting:
                done, waiting = await progress.wait(waiting)
                still = [call for task, call in running.items() if task in waiting]
                for call, approval_id in progress.take_asked(still):
                    yield replace(_step(plan, call, "asked"), approval_id=approval_id)
                for call, reported in progress.take(still):
                    yield _step(plan, call, "progress", reported)
                for task in done:
                    call = running[task]
                    if call.id in plan.left_waiting:
                        continue
                    result = STOPPED_RESULT if task.cancelled() else task.result()
                    if call.id in plan.handed_over:
                        # Run and stored by the process that claimed it, which goes on with the turn.
                        stored.add(call.id)
                        yield _step(plan, call, _ended(result, refused=False))
                        continue
                    stored_rows += await self._store_result(plan, pending, call, result)
                    stored.add(call.id)
                    yield _step(plan, call, _ended(result, refused=call.id in refused))
        finally:
            for task in running:
                task.cancel()
            for call in calls:
                if call.id in stored or call.id in plan.left_waiting:
                    # Left waiting: its question stays pending and the call without a result,
                    # so the restarted process resumes the turn there and waits for the answer.
                    continue
                stored_rows += await self._store_result(plan, pending, call, STOPPED_RESULT)

    async def _run_call(
        self,
        plan: TurnPlan,
        call: ToolCall,
        tools: dict[str, Tool],
        context: ToolContext,
        progress: RoundProgress,
        refused: set[str],
    ) -> ToolResult:
        """One call run, once the policy allows it or a person said yes; else refused, never run.

        The question is stored beside the call (its row is stored before the round runs),
        so a turn a restart resumes finds it again and waits on, and a yes given meanwhile
        — in any process — runs the call once: the run is claimed in the approval's row.
        """
        timeout = self.settings.tools.timeout_seconds
        if call.name not in plan.asking:
            # Allowed, or not offered (denied tools are not): unknown, it fails as unknown.
            return await run_call(call, tools, context, timeout)
        if context.seq is None:
            raise RuntimeError("a call that asks for approval must be stored before it waits")
        approval = await self.approvals.request(
            NewApproval(
                session_id=plan.session.id,
                call_seq=context.seq,
                call_id=call.id,
                user_message_id=plan.user_message_id,
                tool_name=call.name,
                summary=progress_summary(call),
                asker=plan.asker,
                asker_name=plan.asker_name,
                expires_at=utcnow() + self.approvals.expiry(),
            )
        )
        assert approval.id is not None
        progress.ask(call.id, approval.id)
        try:
            approval = await self.approvals.wait(approval, keep=lambda: plan.running.reason == "shutdown")
        except asyncio.CancelledError:
            if plan.running.reason == "shutdown":
                plan.left_waiting.add(call.id)
            raise
        if approval.state != "approved":
            refused.add(call.id)
            return ToolResult.error(refused_result(approval))
        if not await self.approvals.claim_run(approval, self.instance_id):
            return await self._run_elsewhere(plan, call, context.seq)
        result = await run_call(call, tools, context, timeout)
        await self.approvals.note_outcome(approval, "error" if result.is_error else "ok")
        return result

    async def _run_elsewhere(self, plan: TurnPlan, call: ToolCall, call_seq: int) -> ToolResult:
        """The result of an approved call another process claimed the run of, once it stored it.

        Two processes wait on one call when the first lost its conversation lock and the
        second resumed the turn: the one that runs the call goes on with the turn, and this
        one leaves it (`plan.handed_over`), storing nothing and asking the model nothing.
        No result in time (the runner died mid-run): the call is answered as not run again.
        """
        deadline = (
            asyncio.get_running_loop().time() + self.settings.tools.timeout_seconds + RUN_ELSEWHERE_GRACE
        )
        while True:
            row = await self.db.run(self.stores.messages.result_of, plan.session.id, call_seq, call.id)
            if row is not None:
                plan.handed_over.add(call.id)
                return ToolResult(row.content, is_error=row.status == "failed")
            if asyncio.get_running_loop().time() >= deadline:
                return ToolResult.error(RUN_ELSEWHERE_RESULT)
            await asyncio.sleep(POLL_SECONDS)

    async def _store_result(
        self, plan: TurnPlan, pending: PendingCall, call: ToolCall, result: ToolResult
    ) -> list[TranscriptRow | None]:
        """The result stored (after its call row, when that is still pending); the rows stored.

        Its images are stored by reference; one that cannot be is a placeholder in its text.
        """
        images = await asyncio.to_thread(store_tool_images, self.attachments, call.name, result.images)
        content = images.text_with_placeholders(result.content)
        message = NewMessage(
            role="tool",
            content=content,
            token_count=count_tokens(content),
            persona_id=plan.persona.id,
            reply_to_id=plan.user_message_id,
            status="failed" if result.is_error else "complete",
            kind="tool_result",
            tool_call_id=call.id,
            tool_name=call.name,
            attachments=images.attachments,
        )
        if pending.message is None:
            assert pending.seq is not None
            # One result per call: one stored before (by another process) is kept, not doubled.
            appended = await self.db.run(
                self.stores.messages.append_result, plan.session.id, pending.seq, message
            )
            return [appended.row]
        rows = await self.db.run(self.stores.messages.append_all, plan.session.id, [pending.message, message])
        pending.message, pending.seq = None, rows[0].seq
        return [stored.row for stored in rows]


def _ended(result: ToolResult, *, refused: bool) -> ToolStatus:
    """How a call's line ends: not run (no yes), failed, or done."""
    if refused:
        return "denied"
    return "error" if result.is_error else "done"


def _step(plan: TurnPlan, call: ToolCall, status: ToolStatus, progress: str = "") -> ToolStep:
    return ToolStep(
        call.id,
        call.name,
        status,
        progress_summary(call),
        plan.session.id,
        persona_id=plan.persona.id,
        persona_name=plan.persona.name,
        progress=progress,
    )


def progress_summary(call: ToolCall | StoredToolCall) -> str:
    """The call's main argument for a progress line ("dentist" for recall {"query": "dentist"})."""
    try:
        arguments = json.loads(call.arguments)
    except ValueError:
        return ""
    if not isinstance(arguments, dict):
        return ""
    value = next((v for v in arguments.values() if isinstance(v, str) and v.strip()), None)
    if value is None:
        value = next((str(v) for v in arguments.values() if isinstance(v, int | float)), "")
    flat = " ".join(value.split())
    return flat if len(flat) <= SUMMARY_CHARS else flat[: SUMMARY_CHARS - 1] + "…"


class RoundProgress:
    """The newest progress of each call of one round that has reported some since it was last taken."""

    def __init__(self) -> None:
        self._newest: dict[str, str] = {}
        # What each call's line shows already: a report that says the same again changes nothing.
        self._shown: dict[str, str] = {}
        # Calls that now wait for a person's yes or no, with the approval that asks it.
        self._asked: dict[str, int] = {}
        self._reported = asyncio.Event()

    def reporter(self, call_id: str) -> ReportProgress:
        """Where the call `call_id` reports its progress."""

        def report(progress: ToolProgress) -> None:
            self._newest[call_id] = progress.text
            self._reported.set()

        return report

    def ask(self, call_id: str, approval_id: int) -> None:
        """The call `call_id` waits for an answer to approval `approval_id`: the lane shows the question."""
        self._asked[call_id] = approval_id
        self._reported.set()

    def take_asked(self, running: Iterable[ToolCall]) -> list[tuple[ToolCall, int]]:
        """Those of the `running` calls that began waiting for approval since the last take."""
        asked, self._asked = self._asked, {}
        return [(call, asked[call.id]) for call in running if call.id in asked]

    def take(self, running: Iterable[ToolCall]) -> list[tuple[ToolCall, str]]:
        """Those of the `running` calls whose progress changed since the last take, with their
        newest progress text; a call that has ended shows its end rather than its progress."""
        newest, self._newest = self._newest, {}
        self._reported.clear()
        taken: list[tuple[ToolCall, str]] = []
        for call in running:
            text = newest.get(call.id)
            if text is not None and text != self._shown.get(call.id):
                self._shown[call.id] = text
                taken.append((call, text))
        return taken

    async def wait(
        self, running: set[asyncio.Task[Result]]
    ) -> tuple[set[asyncio.Task[Result]], set[asyncio.Task[Result]]]:
        """Until one of `running` ends or a call reports progress: (the ended, the still running)."""
        reported = asyncio.ensure_future(self._reported.wait())
        try:
            await asyncio.wait({*running, reported}, return_when=asyncio.FIRST_COMPLETED)
        finally:
            reported.cancel()
        ended = {task for task in running if task.done()}
        return ended, running - ended
