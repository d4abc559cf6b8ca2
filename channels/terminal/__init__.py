"""The terminal lane behind `chorus chat`: one person's private chat with the engine in a terminal.

It owns how the conversation looks and is typed there — rendered Markdown and line editing in
a terminal, plain lines for scripts — and nothing about turns: it hands each line to the
engine as an `InboundMessage` and shows the events the engine streams back. rich and
prompt_toolkit are imported only when the chat runs in a terminal.
"""

from channels.terminal.chat import APPROVAL_PROMPT, LANE, TerminalChat, chat_loop
from channels.terminal.plain import PROMPT

__all__ = ["APPROVAL_PROMPT", "LANE", "PROMPT", "TerminalChat", "chat_loop"]
