"""Slots: what an item states of its subject, so a newer statement can replace an older one.

The offline half of superseding (the model, when one distils, names the items it replaces
itself). A slot is "subject|name=value": "priya|lives_in=bristol". A new item whose slot
has the same subject and name but another value replaces the current items of that slot
(`bot.storage.memory_items.supersede`): where someone lives, where they work, what their
job is, and the date of a named event ("the wedding moved to 19 June"; a weekday is no
date: "the party is on Friday" may be next week's party). The patterns are
narrow on purpose: a wrongly replaced fact leaves the snapshot, a missed one only stays.
"""

from __future__ import annotations

import re

_NAME = r"(?P<value>[A-Z][\w'-]+(?:\s(?:[A-Z][\w'-]+|upon\b|on\b|de\b|del\b|la\b))*)"
_NOT = re.compile(
    r"\b(?:not|never|don't|didn't|doesn't|no longer|anymore|used to|wish|want|might|maybe)\b", re.I
)
# Present or perfect forms only: "I lived in Paris as a child" says nothing of now.
_LIVES = re.compile(
    r"\b(?:I|[Ww]e)(?:'ve| have)?(?:'m| am|'re| are)? (?:just |finally |now |recently )?"
    r"(?:live|living|been living|moved|relocated|based|settled)\b[^.;!?]*?\b(?:in|to)\s+" + _NAME
)
_WORKS = re.compile(
    r"\b(?:I|[Ww]e)(?:'ve| have)?(?:'m| am)? (?:just |now |recently )?"
    r"(?:work|working|been working|started working|started a job|got a job|joined|took a job)\b"
    r"[^.;!?]*?\b(?:at|for|with)\s+(?:the\s)?" + _NAME
)
_JOB = re.compile(
    r"\bI(?:'m| am) (?:now |currently )?(?:working as )?(?:a|an) (?P<value>(?:[a-z]+ ){0,2}"
    r"(?:nurse|teacher|engineer|developer|programmer|designer|doctor|carpenter|lawyer|manager|officer"
    r"|firefighter|chef|cook|student|writer|artist|architect|accountant|scientist|researcher|consultant))\b"
)
_DATE = re.compile(
    r"\b(?:[Tt]he|[Oo]ur|[Mm]y) (?P<event>[a-z]+(?: (?!is\b|was\b|has\b|will\b|got\b)[a-z]+)?) "
    r"(?:is|was|will be|has been|got|'s)\b[^.;!?]{0,24}?\b(?:to|for|on|until)\s+"
    r"(?P<value>\d{1,2}(?:st|nd|rd|th)?(?: of)? [A-Z][a-z]+|[A-Z][a-z]+ \d{1,2}(?:st|nd|rd|th)?"
    r"|\d{4}-\d\d-\d\d)"
)
_SPEAKER_PREFIX = re.compile(r"^[^:\n]{1,60}:\s+")


def slot_of(content: str, subject: str | None) -> str | None:
    """The slot an item's sentence states of `subject` (its speaker), or None."""
    sentence = _SPEAKER_PREFIX.sub("", content, count=1)
    if _NOT.search(sentence):
        return None
    if subject:
        who = subject.strip().lower()
        for name, pattern in (("lives_in", _LIVES), ("works_at", _WORKS), ("job", _JOB)):
            if found := pattern.search(sentence):
                return f"{who}|{name}={_normalised(found['value'])}"
    if found := _DATE.search(sentence):
        # A named event is the conversation's, whoever mentions it: "*" is every subject.
        return f"*|date:{_normalised(found['event'])}={_normalised(found['value'])}"
    return None


def _normalised(text: str) -> str:
    return " ".join(text.lower().split())
