"""What one request may hold (`Budget`) and what the model can read (`Capabilities`)."""

from __future__ import annotations

from dataclasses import dataclass

from transcript.limits import CONTEXT_COUNT
from transcript.shedding import ToolCost
from transcript.window import stride_of


@dataclass(frozen=True)
class Budget:
    """Caps on one request. None means no cap."""

    max_messages: int = CONTEXT_COUNT
    # The units a window step leaves (transcript.window): None is half of `max_messages`;
    # `max_messages` itself is seed 000's rolling window, which moves every turn.
    low_water: int | None = None
    # The whole request, system preamble included.
    max_tokens: int | None = None
    # History only, as in the window's character cap (docs/ARCHITECTURE.md §5).
    max_chars: int | None = None
    # Text of one document; the rest of it is cut.
    document_tokens: int = 1500
    # Text of all documents together; beyond it, documents are named only.
    documents_total_tokens: int = 6000
    # One tool result as the model reads it; a longer one is cut in the middle (stored whole).
    tool_result_tokens: int = 2000
    # The schemas of the tools offered this call, most wanted first: sent with the
    # messages, so they take room; in a tight window the least wanted give way first.
    tools: tuple[ToolCost, ...] = ()
    # In a tight window, the share of the room earlier messages are owed (transcript.shedding).
    history_share: float = 0.5

    @property
    def window_low_water(self) -> int:
        return self.low_water if self.low_water is not None else max(self.max_messages // 2, 1)

    @property
    def window_stride(self) -> int:
        """Sequence numbers between two window steps; 1 for the rolling window."""
        return stride_of(self.max_messages, self.window_low_water)

    @property
    def tools_tokens(self) -> int:
        return sum(tool.tokens for tool in self.tools)

    def __post_init__(self) -> None:
        if self.max_messages <= 0:
            raise ValueError(f"max_messages must be positive, got {self.max_messages}")
        if self.low_water is not None and not 1 <= self.low_water <= self.max_messages:
            raise ValueError(f"low_water must be between 1 and max_messages, got {self.low_water}")
        for cap in ("max_tokens", "max_chars"):
            value = getattr(self, cap)
            if value is not None and value <= 0:
                raise ValueError(f"{cap} must be positive or None, got {value}")
        if self.tool_result_tokens <= 0 or any(tool.tokens < 0 for tool in self.tools):
            raise ValueError("tool budgets must be positive (result) and not negative (schemas)")
        if not 0 <= self.history_share <= 1:
            raise ValueError(f"history_share must be between 0 and 1, got {self.history_share}")
        if self.document_tokens < 0 or self.documents_total_tokens < 0:
            raise ValueError("document budgets must not be negative")


@dataclass(frozen=True)
class Capabilities:
    """What the model can read besides text."""

    vision: bool = False
    # Whether the model reads tool calls and `tool` messages; if not, an exchange is plain text.
    tools: bool = True
