"""The model a conversation speaks with: the persona's, or the `models:` entry picked with /model.

One answer for every caller (turns, compaction, collapse, distillation, /status,
/context, the console): the model id sent, and whether it takes images, tools and a
thinking level (its window is `bot.windows`'s). Pure: it reads settings, never storage.
"""

from __future__ import annotations

from dataclasses import dataclass

from bot.config import ModelChoiceSettings, Settings

# /think levels, from none to the most the model offers.
THINKING_LEVELS = ("off", "low", "high")


@dataclass(frozen=True)
class ConversationModel:
    model: str  # the id sent to the server
    vision: bool
    tools: bool
    # Whether it takes a thinking level (/think).
    thinking: bool
    # The /model entry's short name; None: the persona's (or the deployment's) model.
    choice: str | None = None


def find_choice(settings: Settings, name: str | None) -> ModelChoiceSettings | None:
    """The `models:` entry called `name` (case-insensitive), if the deployment still offers it."""
    if not name:
        return None
    return next((entry for entry in settings.models if entry.name.lower() == name.lower()), None)


def conversation_model(
    settings: Settings, persona_model: str | None, choice: str | None
) -> ConversationModel:
    """The conversation's model: the picked entry, else the persona's model (flags from its entry, if listed).

    A choice the deployment no longer offers falls back to the persona's model.
    """
    model = settings.model
    entry = find_choice(settings, choice)
    if entry is None:
        model_id = model.model_for(persona_model)
        listed = next((item for item in settings.models if item.model == model_id), None)
        return ConversationModel(
            model=model_id,
            vision=listed.vision if listed is not None else model.vision,
            tools=listed.tools if listed is not None else True,
            thinking=listed.thinking if listed is not None else False,
        )
    return ConversationModel(
        model=entry.model,
        vision=entry.vision,
        tools=entry.tools,
        thinking=entry.thinking,
        choice=entry.name,
    )
