"""Two people on Telegram: private memory stays private, the group's memory is attributed and
holds only what is true now, and each person forgets only their own items in the group."""

from __future__ import annotations

import itertools

from bot.runtime import Runtime
from channels.drafts import CURSOR
from tests.fakes.openai_server import FakeOpenAI
from tests.support.memory_people import (
    Lanes,
    in_a_group_each_person_forgets_only_their_own,
    private_memory_stays_private,
    the_group_sees_only_its_own_attributed_memory,
)
from tests.telegram.bot_api_server import BOT_USERNAME, FakeBotAPI, group_chat, message, private_text, user
from tests.telegram.conftest import LaneFactory

GROUP = -100555
PEOPLE = {"Alice": 701, "Bob": 702}
_message_ids = itertools.count(5000)


def telegram_lanes(runtime: Runtime, bot_api: FakeBotAPI, server: FakeOpenAI) -> Lanes:
    async def shown_after(chat: int, before: int) -> str:
        def delivered() -> bool:
            texts = bot_api.sent_texts(chat)
            return len(texts) > before and not texts[-1].endswith(CURSOR)

        await bot_api.wait_for(delivered)
        return bot_api.sent_texts(chat)[-1].removeprefix("Ada\n")

    async def private(who: str, text: str) -> str:
        chat = PEOPLE[who]
        before = len(bot_api.sent_texts(chat))
        bot_api.push(private_text(chat, text, first_name=who, message_id=next(_message_ids)))
        return await shown_after(chat, before)

    async def group_record(who: str, text: str) -> None:
        message_id = next(_message_ids)
        bot_api.push(message(group_chat(GROUP), user(PEOPLE[who], who), text, message_id=message_id))
        await bot_api.wait_for(
            lambda: runtime.stores.messages.find_platform_message("telegram", str(GROUP), str(message_id))
        )

    async def group_ask(who: str, text: str) -> str:
        before = len(bot_api.sent_texts(GROUP))
        addressed = f"{text.split()[0]}@{BOT_USERNAME} {' '.join(text.split()[1:])}".strip()
        addressed = addressed if text.startswith("/") else f"@{BOT_USERNAME} {text}"
        bot_api.push(
            message(group_chat(GROUP), user(PEOPLE[who], who), addressed, message_id=next(_message_ids))
        )
        return await shown_after(GROUP, before)

    return Lanes(runtime, server, private, group_record, group_ask)


async def test_private_memory_never_reaches_the_other_person_or_the_group(
    start_lane: LaneFactory, runtime: Runtime, bot_api: FakeBotAPI, fake_openai: FakeOpenAI
) -> None:
    await start_lane()
    lanes = telegram_lanes(runtime, bot_api, fake_openai)
    await private_memory_stays_private(lanes)
    await the_group_sees_only_its_own_attributed_memory(lanes)
    await in_a_group_each_person_forgets_only_their_own(lanes)
