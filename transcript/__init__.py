"""Pure functions from a session's stored rows to the model's messages for one turn.

Owns `CONTEXT_COUNT`, token counting, the stepped window and the context contract
(docs/ARCHITECTURE.md §5), plus compaction planning, collapse projection and the /context report
(§7). The engine calls `build_context` for every lane's turns, so all lanes share one
`CONTEXT_COUNT`. It must not do I/O, hold state between turns or decide identity,
and never imports aiogram, discord, fastapi, sqlmodel, httpx, `bot` or `channels`.
"""

from __future__ import annotations

from transcript.budget import Budget, Capabilities
from transcript.build import PersonaLike, build_context, window_step_seq
from transcript.collapse import (
    COLLAPSE_INSTRUCTIONS,
    Collapse,
    Snip,
    collapsed_row,
    is_snipped,
    plan_collapse,
    project_view,
)
from transcript.compaction import (
    CompactionPlan,
    Summarise,
    SummaryFailed,
    SummaryItem,
    SummaryRun,
    adaptive_chunk_ratio,
    chunk_by_max_tokens,
    extract_identifiers,
    fit_summary,
    keep_recent_cut,
    max_chunk_tokens,
    plan_compaction,
    split_by_token_share,
    summarise_in_stages,
    summarise_with_fallback,
    summary_items,
)
from transcript.context import PROVIDER_BLOCKS_KEY, Context, ContextStats, Message, TokensByPart
from transcript.exchanges import exchange_spans, snap_cut, units_of, widen
from transcript.inspect import (
    BilledTokens,
    ContextOverview,
    billed_data,
    billed_line,
    context_data,
    prefix_data,
    render_context_report,
)
from transcript.limits import CONTEXT_COUNT
from transcript.names import sanitise_name
from transcript.rows import AttachmentRef, StoredToolCall, TranscriptRow
from transcript.shedding import ToolCost
from transcript.tokens import count_call_tokens, count_message_tokens, count_tokens, truncate_to_tokens
from transcript.turns import TurnMemo
from transcript.window import RowLike

__all__ = [
    "COLLAPSE_INSTRUCTIONS",
    "CONTEXT_COUNT",
    "PROVIDER_BLOCKS_KEY",
    "AttachmentRef",
    "BilledTokens",
    "Budget",
    "ToolCost",
    "Capabilities",
    "Collapse",
    "CompactionPlan",
    "Context",
    "ContextOverview",
    "ContextStats",
    "Message",
    "PersonaLike",
    "RowLike",
    "Snip",
    "StoredToolCall",
    "Summarise",
    "SummaryFailed",
    "SummaryItem",
    "SummaryRun",
    "TokensByPart",
    "TranscriptRow",
    "TurnMemo",
    "adaptive_chunk_ratio",
    "build_context",
    "window_step_seq",
    "chunk_by_max_tokens",
    "collapsed_row",
    "billed_data",
    "billed_line",
    "prefix_data",
    "context_data",
    "count_call_tokens",
    "count_message_tokens",
    "exchange_spans",
    "count_tokens",
    "extract_identifiers",
    "fit_summary",
    "is_snipped",
    "keep_recent_cut",
    "max_chunk_tokens",
    "plan_collapse",
    "plan_compaction",
    "project_view",
    "render_context_report",
    "sanitise_name",
    "split_by_token_share",
    "summarise_in_stages",
    "summarise_with_fallback",
    "summary_items",
    "truncate_to_tokens",
    "units_of",
    "widen",
    "snap_cut",
]
