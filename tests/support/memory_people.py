"""Two people, their private chats and a group they share, as each lane's memory tests play it.

Alice and Bob each tell the bot a private fact; in the group Alice says where she lives, then
that she moved. What every lane must show: a group's request never holds a private item, one
person's private request never holds the other's, the group's snapshot attributes each item
and holds only the move, and in the group a person forgets only their own items.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from dataclasses import dataclass

from bot.providers.openai import PURPOSE_HEADER
from bot.runtime import Runtime
from tests.fakes.openai_server import FakeOpenAI, RecordedRequest, message_text

ALICE_PRIVATE = "My locker code is 4921 and I decided to keep it secret."
BOB_PRIVATE = "My bank PIN is 7788 and I decided never to share it."
ALICE_HOME = "I have been living in Lisbon for almost five years now."
ALICE_MOVE = "Big news: we moved to Porto in May!"
SECRETS = ("4921", "7788")


def chat_requests(server: FakeOpenAI) -> list[RecordedRequest]:
    """Turn requests only: after-turn work (memory distillation) sends requests of its own."""
    return [request for request in server.requests if PURPOSE_HEADER.lower() not in request.headers]


def system_text(request: RecordedRequest) -> str:
    """The request's earlier context: its system message, then the turn's note (recall,
    documents), which follows the newest user message's text."""
    users = [m for m in request.messages if m["role"] == "user"]
    shown = [m for m in request.messages if m["role"] == "system"] + users[-1:]
    return "\n".join(message_text(m) for m in shown)


def section(text: str, heading: str) -> str:
    """The lines under a `## heading` of the request's system text, up to the next heading."""
    _, found, rest = text.partition(f"## {heading}\n")
    return rest.split("\n## ", 1)[0] if found else ""


def request_text(request: RecordedRequest) -> str:
    return request.body.decode()


async def flush_all(runtime: Runtime) -> None:
    """Every conversation goes idle: what is pending is distilled and stored."""
    await runtime.engine.drain()
    assert runtime.memory is not None
    for session, _ in runtime.stores.sessions.list_sessions():
        await runtime.memory.flush(session)


# (who, text) → the reply as the lane shows it.
Say = Callable[[str, str], Awaitable[str]]
# (who, text): a group message the bot is not addressed in, recorded.
Record = Callable[[str, str], Awaitable[None]]


@dataclass
class Lanes:
    """How one lane's test speaks: privately as Alice or Bob, and in the group."""

    runtime: Runtime
    server: FakeOpenAI
    private: Say
    group_record: Record | None = None
    group_ask: Say | None = None


async def private_memory_stays_private(lanes: Lanes) -> None:
    await lanes.private("Alice", ALICE_PRIVATE)
    await lanes.private("Bob", BOB_PRIVATE)
    await flush_all(lanes.runtime)

    await lanes.private("Bob", "What is Alice's locker code?")
    bob = request_text(chat_requests(lanes.server)[-1])
    await lanes.private("Alice", "What is my locker code again?")
    alice = request_text(chat_requests(lanes.server)[-1])

    assert "7788" in bob and "4921" not in bob
    assert "4921" in alice and "7788" not in alice


async def the_group_sees_only_its_own_attributed_memory(lanes: Lanes) -> None:
    assert lanes.group_record is not None and lanes.group_ask is not None
    await lanes.group_record("Alice", ALICE_HOME)
    await flush_all(lanes.runtime)
    await lanes.group_record("Alice", ALICE_MOVE)
    await lanes.group_record("Bob", "I decided to bring the cake on Saturday.")
    await flush_all(lanes.runtime)

    await lanes.group_ask("Bob", "Where does Alice live now, and what is her locker code?")
    request = chat_requests(lanes.server)[-1]
    snapshot = section(system_text(request), "Long-term memory")

    assert not any(secret in request_text(request) for secret in SECRETS)
    assert "Alice: Big news: we moved to Porto in May!" in snapshot
    assert "Bob: I decided to bring the cake on Saturday." in snapshot
    assert "Lisbon" not in snapshot  # replaced: history, not what holds
    # Recall may still bring the old words back, marked as what held before.
    recalled = [line for line in system_text(request).splitlines() if "Lisbon" in line]
    assert all("no longer holds since" in line for line in recalled)


async def in_a_group_each_person_forgets_only_their_own(lanes: Lanes) -> None:
    assert lanes.group_ask is not None
    listed = await lanes.group_ask("Bob", "/memory")
    alice_item = next(line for line in listed.splitlines() if "Porto" in line).split()[0].lstrip("#")
    refused = await lanes.group_ask("Bob", f"/forget {alice_item}")
    assert "Alice's" in refused and "Forgot" not in refused
    forgot = await lanes.group_ask("Alice", "/forget me")
    assert forgot.startswith("Forgot 2 items of yours")  # the move, and the home it replaced
    left = await lanes.group_ask("Bob", "/memory")
    assert "cake" in left and "Porto" not in left
