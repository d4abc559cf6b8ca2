"""What the model sees of a session now, gathered once for `/context` and the `context_inspect` tool."""

from __future__ import annotations

from bot.context.maintenance import ContextMaintainer
from bot.memory.snapshot import shorten
from bot.providers.base import shown_model
from bot.storage.models import ChatSession
from transcript import ContextOverview, TranscriptRow
from transcript.audio import is_audio, render_audio

# How much of each message in the window the overview shows.
ENTRY_PREVIEW_CHARS = 60


async def context_overview(maintainer: ContextMaintainer, session: ChatSession) -> ContextOverview:
    """The next turn's context as built now, with the records that shaped it."""
    persona = maintainer.persona_for(session)
    view = await maintainer.db.run(maintainer.assembler.view, session.id)
    built = await maintainer.assembler.assemble(session, persona, view)
    model = maintainer.model_for(session)
    model_window = maintainer.assembler.windows.info(model.model)
    settings = maintainer.settings
    in_window = set(built.stats.kept_seqs)
    window = [row for row in view.projected if row.seq in in_window]
    return ContextOverview(
        persona=f"{persona.name} ({persona.id})",
        model=shown_model(maintainer.provider, model.model)
        + (f" (/model {model.choice})" if model.choice else ""),
        window_tokens=model_window.window,
        reply_reserve_tokens=model_window.reply_reserve,
        window_note=model_window.describe(),
        stats=built.stats,
        stored_messages=session.last_seq,
        view_seqs=[row.seq for row in view.projected],
        summary_last_seq=view.summary.last_seq if view.summary is not None else None,
        summary_updates=(
            await maintainer.db.run(maintainer.records.summary_updates, session.id)
            if view.summary is not None
            else 0
        ),
        collapses=view.collapses,
        snips=view.snips,
        compact_share=settings.compact_share,
        collapse_share=settings.collapse_share,
        entries=[(row.seq, _speaker(row), _opening(row)) for row in window],
        reasoning_tokens=await maintainer.db.run(maintainer.messages.last_reasoning_tokens, session.id),
        voice=[
            (row.seq, _speaker(row), render_audio(attachment))
            for row in window
            for attachment in row.attachments
            if is_audio(attachment)
        ],
        last_turn=await maintainer.db.run(maintainer.messages.last_turn_billed, session.id),
        prefix=maintainer.prefixes.history(session.id),
    )


def _opening(row: TranscriptRow) -> str:
    """The message's first words; a voice note without text is what was heard in it."""
    heard = [render_audio(attachment) for attachment in row.attachments if is_audio(attachment)]
    return shorten(" ".join(" ".join([row.content, *heard]).split()), ENTRY_PREVIEW_CHARS)


def _speaker(row: TranscriptRow) -> str:
    if row.role == "tool":
        return f"tool {row.tool_name or ''}".strip()
    if row.role == "assistant":
        called = ", ".join(call.name for call in row.tool_calls)
        return f"assistant ({row.persona_id})" + (f" calling {called}" if called else "")
    return row.sender_name or "user"
