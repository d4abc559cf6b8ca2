"""The stores of one database, built together once by the runtime.

Each store owns one concern; this bundle only carries them to the parts that use
several (the turn engine, commands, the console, export and import). It adds no
methods of its own: a caller names the store it means (`stores.messages.append`).
"""

from __future__ import annotations

from dataclasses import dataclass

from sqlalchemy.engine import Engine as DatabaseEngine

from bot.storage.approvals import ApprovalStore
from bot.storage.context_records import ContextRecords
from bot.storage.deliveries import DeliveryStore
from bot.storage.identities import IdentityStore
from bot.storage.jobs import JobSink
from bot.storage.memory_store import MemoryStore
from bot.storage.messages import MessageStore
from bot.storage.model_profiles import ModelProfileStore
from bot.storage.pairings import PairingStore
from bot.storage.reminders import ReminderStore
from bot.storage.sessions import SessionStore
from bot.storage.visitors import VisitorStore


@dataclass(frozen=True)
class Stores:
    database: DatabaseEngine
    identities: IdentityStore
    visitors: VisitorStore
    sessions: SessionStore
    messages: MessageStore
    records: ContextRecords
    memory: MemoryStore
    deliveries: DeliveryStore
    reminders: ReminderStore
    profiles: ModelProfileStore
    pairings: PairingStore
    approvals: ApprovalStore

    @classmethod
    def open(cls, database: DatabaseEngine, jobs: JobSink | None = None) -> Stores:
        """Every store on `database`; `jobs` takes the jobs a stored message asks for."""
        return cls(
            database=database,
            identities=IdentityStore(database),
            visitors=VisitorStore(database),
            sessions=SessionStore(database),
            messages=MessageStore(database, jobs),
            records=ContextRecords(database),
            memory=MemoryStore(database),
            deliveries=DeliveryStore(database),
            reminders=ReminderStore(database, jobs),
            profiles=ModelProfileStore(database),
            pairings=PairingStore(database),
            approvals=ApprovalStore(database),
        )
