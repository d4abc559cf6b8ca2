"""What a turn says to the person when it cannot answer as usual (never stored as a reply)."""

from __future__ import annotations

# A turn a shutdown cut while a call waited for approval: the next process asks again.
WAITING_AT_SHUTDOWN = (
    "Chorus is restarting. The tool call waiting for your answer still waits: answer it once "
    "Chorus is back, and the reply goes on."
)
RESTARTING_MESSAGE = "Chorus is restarting, so this message was not answered. Please send it again soon."
# Shown (never stored) when the model only thought: its thinking is kept, the answer is empty.
ONLY_THOUGHT_NOTE = (
    "[The model only thought and gave no answer (its thinking is kept: /reasoning on shows it). "
    "Ask again, or ask it to answer.]"
)
OVERFLOW_MESSAGE = (
    "This conversation has grown too large for the model, even after folding older "
    "messages. Your message is saved; try /compact, /snip some messages, or /new."
)
