"""Personas: who the bot speaks as.

Owns persona definitions (from config), lookup, and the persona part of the
system prompt. The engine asks it which persona a session speaks with and
stores switches; this package never knows which lane a message came from and
does no I/O.
"""

from persona.registry import Persona, PersonaRegistry

__all__ = ["Persona", "PersonaRegistry"]
