"""Reminders: messages the bot starts, when a person (or the model) asked for them.

`times` reads when a reminder falls due; `service` schedules, lists, cancels and fires
them over `bot.storage.reminders`; `delivery` is how a fired reminder reaches its lane;
`tools` are the model's `schedule`, `list_schedules` and `cancel_schedule`, and
`bot.commands.reminders` the people's `/remind`, `/reminders` and `/timezone`.
"""
