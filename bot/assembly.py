"""Gathers what a turn's context is built from, then calls `transcript`.

The engine, `/status` and `/context` all build the context here, so what they
show is exactly what the model gets.
"""

from __future__ import annotations

from dataclasses import replace

from bot.attachments import AttachmentStore
from bot.config import Settings
from bot.storage.models import ChatSession
from bot.storage.store import Store
from persona import Persona
from transcript import (
    CONTEXT_COUNT,
    Budget,
    Capabilities,
    Context,
    TranscriptRow,
    build_context,
)


class ContextAssembler:
    def __init__(self, settings: Settings, store: Store, attachments: AttachmentStore) -> None:
        self.settings = settings
        self.store = store
        self.attachments = attachments

    def budget_for(self, persona: Persona) -> Budget:
        model = self.settings.model
        window = model.window_for(persona.model or model.name)
        return Budget(
            max_messages=CONTEXT_COUNT,
            max_tokens=max(window - model.reply_reserve_tokens, 1),
            max_chars=self.settings.context.max_chars,
            document_tokens=self.settings.context.document_tokens,
            documents_total_tokens=self.settings.context.documents_total_tokens,
        )

    async def assemble(self, session: ChatSession, persona: Persona) -> Context:
        rows = self.store.recent_rows(session.id, CONTEXT_COUNT)
        vision = self.settings.model.vision
        if vision:
            rows = [self._with_image_data(row) for row in rows]
        return build_context(
            rows,
            persona=persona,
            budget=self.budget_for(persona),
            capabilities=Capabilities(vision=vision),
            group=session.kind == "group",
            documents=self.store.session_documents(session.id),
        )

    def _with_image_data(self, row: TranscriptRow) -> TranscriptRow:
        if not any(attachment.kind == "image" for attachment in row.attachments):
            return row
        return replace(
            row,
            attachments=tuple(
                replace(attachment, data_url=self.attachments.image_data_url(attachment.sha256))
                if attachment.kind == "image"
                else attachment
                for attachment in row.attachments
            ),
        )
