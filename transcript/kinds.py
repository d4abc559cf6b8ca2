"""What a stored message can be: its role, its kind and its status, each a closed set, defined once.

`kind` says what a row is, so no reader guesses it from the text:

- `message`: what a person said (role `user`) or a persona answered (role `assistant`).
  Only these are searched (the full-text index) and counted as turns by memory offload.
- `tool_call`: a persona's message that called tools (role `assistant`; its calls ride
  along), and `tool_result`: one call's result (role `tool`). They reach the model as one
  exchange, never split; search and memory do not take them for something a person said.
- `reminder`: a reminder a persona delivered when it fell due (role `assistant`, tagged
  with the persona that set it). The model reads it as that persona's message; it answers
  no one, so it ends no turn, and search and memory offload leave it out like tool rows.
- events, role `system`: stored, exported and shown in histories, never sent to the model.
  `command` (a command as someone sent it), `command_reply` (its answer as shown),
  `persona_switch` (the session's voice changed; the row names the new persona),
  `error` (why a turn got no reply, as the person was told), `reasoning` (a persona's
  thinking in one model call of a turn, stored before what that call answered and tagged
  with the persona; shown with `/reasoning on`, never the answer's text nor history) and
  `note` (anything else: an operator's action, an event imported from elsewhere).

Storage imports these sets (`bot.storage` validates every row it writes against them).
Adding a kind is one entry in `MessageKind` and `KIND_ROLES`, then one branch in each reader
that switches on it: `transcript.build` (what the model sees), `bot.cli.transfer` (export,
import), `bot.console`, the web lane's history, `bot.storage.message_append` (the search index,
the reply that closes a turn) and `bot.memory.triggers`. A reader that meets a kind it does not
know raises `UnknownMessageKind` rather than guess.
"""

from __future__ import annotations

from typing import Literal, get_args

Role = Literal["user", "assistant", "system", "tool"]
MessageKind = Literal[
    "message",
    "tool_call",
    "tool_result",
    "reminder",
    "command",
    "command_reply",
    "persona_switch",
    "error",
    "note",
    "reasoning",
]
# `interrupted`: the reply stream ended early (stopped, cut off, the lane stopped listening).
# `failed`: a tool result saying the call went wrong (the model reads it as an error).
Status = Literal["complete", "interrupted", "failed"]

ROLES: tuple[Role, ...] = get_args(Role)
KINDS: tuple[MessageKind, ...] = get_args(MessageKind)
STATUSES: tuple[Status, ...] = get_args(Status)

# The roles a row of each kind may have.
KIND_ROLES: dict[MessageKind, frozenset[Role]] = {
    "message": frozenset({"user", "assistant"}),
    "tool_call": frozenset({"assistant"}),
    "tool_result": frozenset({"tool"}),
    "reminder": frozenset({"assistant"}),
    "command": frozenset({"system"}),
    "command_reply": frozenset({"system"}),
    "persona_switch": frozenset({"system"}),
    "error": frozenset({"system"}),
    "note": frozenset({"system"}),
    "reasoning": frozenset({"system"}),
}
# A persona's answer to a person is an assistant row of this kind (see `is_reply`).
REPLY_KIND: MessageKind = "message"
# The conversation: what the model sees and the window reads.
CONVERSATION_KINDS: frozenset[MessageKind] = frozenset({"message", "tool_call", "tool_result", "reminder"})
# What people and personas said: what search finds and memory offload counts as turns.
SAID_KINDS: frozenset[MessageKind] = frozenset({"message"})
# Steps of a turn that are not said to anyone: memory offload counts them as steps.
TOOL_KINDS: frozenset[MessageKind] = frozenset({"tool_call", "tool_result"})
EVENT_KINDS: frozenset[MessageKind] = frozenset(KINDS) - CONVERSATION_KINDS


class UnknownMessageKind(ValueError):
    """A row whose kind, role or status is none of the closed sets (or a kind with a role it cannot have)."""


def message_kind(value: object) -> MessageKind:
    """`value` as a kind; raises `UnknownMessageKind` for anything else."""
    for kind in KINDS:
        if value == kind:
            return kind
    raise UnknownMessageKind(f"unknown message kind {value!r} (known: {', '.join(KINDS)})")


def message_role(value: object) -> Role:
    for role in ROLES:
        if value == role:
            return role
    raise UnknownMessageKind(f"unknown message role {value!r} (known: {', '.join(ROLES)})")


def message_status(value: object) -> Status:
    for status in STATUSES:
        if value == status:
            return status
    raise UnknownMessageKind(f"unknown message status {value!r} (known: {', '.join(STATUSES)})")


def check_row(kind: object, role: object, status: object) -> tuple[MessageKind, Role, Status]:
    """The three, checked against each other; raises `UnknownMessageKind` for a row no reader knows."""
    checked = message_kind(kind), message_role(role), message_status(status)
    if checked[1] not in KIND_ROLES[checked[0]]:
        raise UnknownMessageKind(f"a {checked[0]!r} row cannot have role {checked[1]!r}")
    return checked


def is_conversation(kind: object) -> bool:
    """Whether rows of this kind are part of the conversation (the model sees them); raises when unknown."""
    return message_kind(kind) in CONVERSATION_KINDS


def is_reply(kind: object, role: object) -> bool:
    """Whether the row is a persona's answer to a person: it ends the turn it answers.

    An assistant row of another kind (a later tool call, a reminder) does not.
    """
    return message_kind(kind) == REPLY_KIND and role == "assistant"
