"""Who a session's memory and reminders belong to: a person (private chats) or a group.

Every memory and reminder query is scoped by an `Owner`, so a person's private memory
and a group's never meet.
"""

from __future__ import annotations

from dataclasses import dataclass

from bot.storage.models import ChatSession


@dataclass(frozen=True)
class Owner:
    """Who memory belongs to: ("person", person id) or ("group", "lane:chat_id")."""

    kind: str
    id: str

    @classmethod
    def of(cls, session: ChatSession) -> Owner:
        return cls(session.owner_kind, session.owner_id)
