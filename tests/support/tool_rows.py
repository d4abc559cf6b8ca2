"""The rows a process leaves when it dies between two tool rounds, for recovery tests."""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta
from typing import Any

from bot.storage.delivery_models import Delivery
from bot.storage.message_append import DeliveryTarget, NewMessage
from bot.storage.stores import Stores
from transcript import StoredToolCall


def left_between_rounds(
    stores: Stores,
    *,
    lane: str,
    user_id: str,
    message_id: str,
    question: str,
    tool: str,
    arguments: list[dict[str, Any]],
    first_result: str,
) -> Delivery:
    """A private turn on `lane` whose model called `tool` once per `arguments`, with only
    the first call's result stored, owned by a process that is gone; its delivery state."""
    account = stores.identities.account(lane, user_id, "Alice", None)
    session = stores.sessions.private_session(account.person_id, "ada")
    asked = stores.messages.append(
        session.id,
        NewMessage(
            role="user",
            content=question,
            token_count=5,
            sender_name="Alice",
            lane=lane,
            platform_chat_id=user_id,
            platform_message_id=message_id,
            delivery=DeliveryTarget("private", None, "a-dead-process"),
        ),
    )
    calls = tuple(
        StoredToolCall(f"c{number}", tool, json.dumps(argument))
        for number, argument in enumerate(arguments, 1)
    )
    stores.messages.append(
        session.id,
        NewMessage(
            role="assistant",
            kind="tool_call",
            content="",
            token_count=9,
            persona_id="ada",
            reply_to_id=asked.id,
            tool_calls=calls,
        ),
    )
    stores.messages.append(
        session.id,
        NewMessage(
            role="tool",
            kind="tool_result",
            content=first_result,
            token_count=2,
            reply_to_id=asked.id,
            tool_call_id=calls[0].id,
            tool_name=tool,
        ),
    )
    [delivery] = stores.deliveries.unfinished(datetime.now(UTC) - timedelta(hours=1), [lane], "this-process")
    return delivery
