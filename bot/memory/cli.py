"""`chorus recall SESSION QUERY [-k N] [--json]`: search the memory of a session's owner;
`chorus memory list|forget PERSON`: one person's memory, wherever it is kept."""

from __future__ import annotations

import json

from sqlalchemy.engine import Engine as DatabaseEngine

from bot.config import MemorySettings
from bot.errors import ChorusError
from bot.memory.dense import DenseIndex, load_embedder
from bot.memory.recall import Recall, format_hit, hit_record
from bot.memory.snapshot import attributed, shorten
from bot.storage.identities import IdentityStore
from bot.storage.memory_models import MemoryItem
from bot.storage.memory_store import MemoryStore
from bot.storage.owners import Owner
from bot.storage.sessions import SessionStore


class UnknownSession(ChorusError):
    def __init__(self, prefix: str) -> None:
        super().__init__(f"no single session matches '{prefix}' (see `chorus sessions`)")


def recall_output(
    database: DatabaseEngine,
    settings: MemorySettings,
    session_prefix: str,
    query: str,
    *,
    limit: int,
    as_json: bool,
) -> str:
    """What `chorus recall` prints: numbered hits, or a JSON array with `--json`."""
    chat = SessionStore(database).find_session(session_prefix)
    if chat is None:
        raise UnknownSession(session_prefix)
    memory = MemoryStore(database)
    embedder = load_embedder() if settings.dense else None
    dense = DenseIndex(memory, embedder) if embedder is not None else None
    hits = Recall(memory, settings, dense).search(Owner.of(chat), query, limit)
    if as_json:
        return json.dumps([hit_record(hit) for hit in hits], ensure_ascii=False, indent=2)
    if not hits:
        return f"Nothing found for “{query}”."
    return "\n".join(f"{n}. {format_hit(hit)} (score {hit.score:.4f})" for n, hit in enumerate(hits, 1))


class UnknownPerson(ChorusError):
    def __init__(self, who: str) -> None:
        super().__init__(
            f"no person or account '{who}': give a person id or an account as lane:user id "
            "(e.g. telegram:12345)"
        )


def person_items(database: DatabaseEngine, who: str) -> tuple[str, list[MemoryItem]]:
    """The person `who` (a person id, or an account "lane:user id") and their items: all of
    their private memory, and in groups what they said or what is about them (by any of
    their accounts' names), oldest first."""
    identities = IdentityStore(database)
    lane, _, user = who.partition(":")
    account = identities.find_account(lane, user) if user else None
    person_id = account.person_id if account is not None else who
    accounts = identities.accounts_of(person_id)
    if not accounts:
        raise UnknownPerson(who)
    memory = MemoryStore(database)
    items = {item.id: item for item in memory.all_items(Owner("person", person_id))}
    for item in memory.items_said_by(person_id):
        items.setdefault(item.id, item)
    names = {account.display_name.strip().lower() for account in accounts if account.display_name.strip()}
    for item in memory.items_about(names):
        items.setdefault(item.id, item)
    return person_id, sorted(items.values(), key=lambda item: item.id or 0)


def person_memory_output(database: DatabaseEngine, who: str, *, history: bool) -> str:
    """What `chorus memory list PERSON` prints: one line per item, where it is kept."""
    person_id, items = person_items(database, who)
    shown = [item for item in items if history or item.current]
    if not shown:
        return f"Nothing remembered of person {person_id}."
    lines = []
    for item in shown:
        where = "private" if item.owner_kind == "person" else f"group {item.owner_id}"
        until = f" until {item.valid_until:%Y-%m-%d}" if item.valid_until is not None else ""
        text = shorten(attributed(item.content, item.about, item.said_by_name), 200)
        lines.append(f"#{item.id} [{item.kind}] {where}{until} — {text}")
    return "\n".join(lines)


def forget_person(database: DatabaseEngine, who: str, item_ids: list[int] | None) -> str:
    """`chorus memory forget PERSON [ID ...]`: the given items of the person, or all of them."""
    person_id, items = person_items(database, who)
    theirs = {item.id: item for item in items if item.id is not None}
    wanted: list[int] = list(theirs) if item_ids is None else item_ids
    strangers = [n for n in wanted if n not in theirs]
    if strangers:
        raise ChorusError(f"not items of person {person_id}: {', '.join(f'#{n}' for n in strangers)}")
    memory = MemoryStore(database)
    for identifier in wanted:
        item = theirs[identifier]
        memory.delete_item(Owner(item.owner_kind, item.owner_id), identifier)
    return f"Forgot {len(wanted)} item{'s' if len(wanted) != 1 else ''} of person {person_id}."


def backlog_notice(database: DatabaseEngine, settings: MemorySettings, session_prefix: str) -> str | None:
    """A line saying how far memory is behind the owner's conversations, or None when it is not.

    Messages the offload has not reached are found by full text only: their memory
    items are not distilled and (with dense recall) their vectors not computed yet.
    """
    chat = SessionStore(database).find_session(session_prefix)
    if chat is None or not settings.enabled:
        return None
    backlog = MemoryStore(database).backlog(
        Owner.of(chat), dense=settings.dense and load_embedder() is not None
    )
    parts = []
    if backlog.messages:
        where = "conversation" if backlog.sessions == 1 else f"{backlog.sessions} conversations"
        parts.append(
            f"{backlog.messages} message{'s' if backlog.messages != 1 else ''} in {where} not offloaded yet "
            "(found by full text only; their memory items and vectors come with the next offload)"
        )
    if backlog.unembedded:
        plural = "s" if backlog.unembedded != 1 else ""
        parts.append(
            f"{backlog.unembedded} offloaded message{plural} without a vector "
            "(`chorus memory reindex`, or the background pass of `chorus serve`, embeds them)"
        )
    return "Memory is behind: " + "; ".join(parts) + "." if parts else None
