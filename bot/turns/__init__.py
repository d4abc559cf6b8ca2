"""The turn pipeline: an `InboundMessage` in, `Delta`s and one `Reply` out.

`engine` orders the steps of a turn; `routing` finds the session, `locks` keeps
one turn per session at a time, `attachments` stores files, `assembly` builds the
model's context through `transcript`, and `events` holds what a turn yields.
"""
