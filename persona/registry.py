"""Persona definitions and their lookup."""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from dataclasses import dataclass

# Told to every persona so that a switch mid-session keeps attribution straight:
# earlier assistant turns carry the `name` of the persona that spoke them.
ATTRIBUTION_NOTE = (
    "Several personas may speak in this conversation. Each earlier assistant message "
    "is labelled with the id of the persona that wrote it; only messages labelled "
    "'{id}' are yours. Users' messages are labelled with their sender's name."
)


@dataclass(frozen=True)
class Persona:
    """One voice the bot can speak with."""

    id: str
    name: str
    prompt: str
    greeting: str | None = None
    model: str | None = None
    temperature: float | None = None
    top_p: float | None = None
    # A picture of the persona for lanes that can show one (an https URL).
    avatar_url: str | None = None
    # The tools this persona may call (names, `*` wildcards); None: every tool the deployment allows.
    tools: tuple[str, ...] | None = None

    @property
    def system_prompt(self) -> str:
        """The persona's part of the system preamble."""
        header = f"You are {self.name} (persona id '{self.id}')."
        return f"{header}\n{self.prompt.strip()}\n\n{ATTRIBUTION_NOTE.format(id=self.id)}"


class PersonaRegistry:
    """The configured personas, in configuration order, with one default."""

    def __init__(self, personas: Iterable[Persona], default_id: str) -> None:
        self._by_id = {persona.id.lower(): persona for persona in personas}
        if not self._by_id:
            raise ValueError("at least one persona must be configured")
        if default_id.lower() not in self._by_id:
            raise ValueError(f"default persona '{default_id}' is not among {self.ids()}")
        self.default = self._by_id[default_id.lower()]

    def __iter__(self) -> Iterator[Persona]:
        return iter(self._by_id.values())

    def __len__(self) -> int:
        return len(self._by_id)

    def ids(self) -> list[str]:
        return list(self._by_id)

    def get(self, persona_id: str | None) -> Persona | None:
        """The persona with this id, or None when there is none."""
        if persona_id is None:
            return None
        return self._by_id.get(persona_id.strip().lower())

    def resolve(self, persona_id: str | None) -> Persona:
        """The persona with this id, falling back to the default.

        A session may name a persona that was since removed from the
        configuration; it keeps talking with the default instead of failing.
        """
        return self.get(persona_id) or self.default
