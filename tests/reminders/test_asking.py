"""Asking for reminders: the times people and the model may give, the limits, and the commands."""

from __future__ import annotations

from datetime import UTC, datetime
from pathlib import Path
from zoneinfo import ZoneInfo

import pytest
from sqlalchemy import text

from bot.reminders.times import BadTime, parse_arguments, parse_command
from bot.runtime import Runtime
from bot.tools.base import ChatAddress, ToolContext
from tests.support.runtime import RuntimeFactory, inbound

NOW = datetime(2026, 12, 1, 15, 0, tzinfo=UTC)
BERLIN = ZoneInfo("Europe/Berlin")


def due(args: str, zone: ZoneInfo = BERLIN) -> tuple[str, str | None, str]:
    parsed = parse_command(args, zone, NOW, 60)
    return parsed.when.due_at.isoformat(), parsed.when.cron, parsed.text


def test_durations_dates_clock_times_and_recurrences_are_read_in_the_persons_zone() -> None:
    assert due("30s stand up") == ("2026-12-01T15:00:30+00:00", None, "stand up")
    assert due("1h30m tea") == ("2026-12-01T16:30:00+00:00", None, "tea")
    assert due("3d water plants") == ("2026-12-04T15:00:00+00:00", None, "water plants")
    # 09:00 in Berlin in winter is 08:00 UTC.
    assert due("2026-12-24 09:00 call mum") == ("2026-12-24T08:00:00+00:00", None, "call mum")
    # 15:00 UTC is 16:00 in Berlin: 08:00 is tomorrow's.
    assert due("08:00 run") == ("2026-12-02T07:00:00+00:00", None, "run")
    assert due("every day 08:00 standup") == ("2026-12-02T07:00:00+00:00", "0 8 * * *", "standup")
    assert due("every weekday 18:30 go home")[1] == "30 18 * * 1-5"
    assert due("every monday 09:15 plan")[1:] == ("15 9 * * 1", "plan")
    assert due("cron 0 8 * * 1-5 standup")[1:] == ("0 8 * * 1-5", "standup")


def test_bad_times_say_what_is_accepted_and_the_past_and_too_frequent_are_refused() -> None:
    with pytest.raises(BadTime, match="I accept a duration"):
        parse_command("soonish stretch", BERLIN, NOW, 60)
    with pytest.raises(BadTime, match="in the past"):
        parse_command("2020-01-01 09:00 too late", BERLIN, NOW, 60)
    with pytest.raises(BadTime, match="in the past"):
        parse_arguments(BERLIN, NOW, 60, at="2026-12-01T15:59+01:00")
    with pytest.raises(BadTime, match="at most every"):
        parse_arguments(BERLIN, NOW, 120, cron="* * * * *")
    with pytest.raises(BadTime, match="not a cron expression"):
        parse_arguments(BERLIN, NOW, 60, cron="every tuesday")
    with pytest.raises(BadTime, match="exactly one"):
        parse_arguments(BERLIN, NOW, 60, in_seconds=5, at="2026-12-24T09:00")
    with pytest.raises(BadTime, match="Say what to remind you of"):
        parse_command("10m", BERLIN, NOW, 60)


def reminder_rows(runtime: Runtime) -> list[tuple[int, str, str, str, str | None]]:
    with runtime.database.connect() as connection:
        rows = connection.execute(text("SELECT id, text, state, lane, cron FROM reminders ORDER BY id")).all()
    return [tuple(row) for row in rows]  # type: ignore[misc]


async def test_remind_reminders_cancel_and_timezone_commands(
    runtimes: RuntimeFactory, tmp_path: Path
) -> None:
    runtime = runtimes(tmp_path, jobs_worker=False)
    said = await runtime.engine.respond(inbound("/timezone Europe/Berlin", lane="telegram"))
    assert "Europe/Berlin" in said.text
    said = await runtime.engine.respond(inbound("/remind 2030-12-24 09:00 call mum", lane="telegram"))
    assert "2030-12-24 09:00 CET" in said.text, said.text
    said = await runtime.engine.respond(inbound("/remind every day 08:00 standup", lane="telegram"))
    assert "0 8 * * *" in said.text
    assert [row[1:] for row in reminder_rows(runtime)] == [
        ("call mum", "scheduled", "telegram", None),
        ("standup", "scheduled", "telegram", "0 8 * * *"),
    ]
    listed = await runtime.engine.respond(inbound("/reminders", lane="telegram"))
    assert "call mum" in listed.text and "standup" in listed.text
    first = reminder_rows(runtime)[0][0]
    said = await runtime.engine.respond(inbound(f"/reminders cancel {first}", lane="telegram"))
    assert said.text == f"Cancelled reminder #{first}."
    assert reminder_rows(runtime)[0][2] == "cancelled"
    listed = await runtime.engine.respond(inbound("/reminders", lane="telegram"))
    assert "call mum" not in listed.text and "standup" in listed.text
    # Another person sees none of them, and cannot cancel them.
    other = await runtime.engine.respond(inbound("/reminders", lane="telegram", user_id="u2"))
    assert "No reminders here" in other.text
    refused = await runtime.engine.respond(
        inbound(f"/reminders cancel {first + 1}", lane="telegram", user_id="u2")
    )
    assert "no waiting reminder" in refused.text
    bad = await runtime.engine.respond(inbound("/remind whenever stretch", lane="telegram"))
    assert "I accept" in bad.text


async def test_a_group_reminder_is_the_groups(runtimes: RuntimeFactory, tmp_path: Path) -> None:
    runtime = runtimes(tmp_path, jobs_worker=False)
    said = await runtime.engine.respond(
        inbound("/remind 2h stand up", lane="discord", chat_id="g1", chat_kind="group", thread_id="t9")
    )
    assert "stand up" in said.text
    with runtime.database.connect() as connection:
        row = connection.execute(
            text("SELECT owner_kind, chat_id, chat_kind, thread_id FROM reminders")
        ).one()
    assert tuple(row) == ("group", "g1", "group", "t9")
    # In the group, everyone sees the group's reminder; in private, Alice does not.
    listed = await runtime.engine.respond(
        inbound("/reminders", lane="discord", user_id="u2", chat_id="g1", chat_kind="group", thread_id="t9")
    )
    assert "stand up" in listed.text
    private = await runtime.engine.respond(inbound("/reminders", lane="discord"))
    assert "No reminders here" in private.text


async def test_the_limit_of_waiting_reminders_per_person(runtimes: RuntimeFactory, tmp_path: Path) -> None:
    runtime = runtimes(tmp_path, jobs_worker=False, reminders_max_active=2, reminders_max_text_chars=20)
    for n in range(2):
        said = await runtime.engine.respond(inbound(f"/remind 1h thing {n}"))
        assert "I will remind you" in said.text
    refused = await runtime.engine.respond(inbound("/remind 1h one too many"))
    assert "already have 2 reminders waiting" in refused.text
    long = await runtime.engine.respond(inbound("/remind 1h " + "x" * 21, user_id="u3"))
    assert "may be 20 characters" in long.text


async def test_the_tools_schedule_list_and_cancel_as_json(runtimes: RuntimeFactory, tmp_path: Path) -> None:
    runtime = runtimes(tmp_path, jobs_worker=False)
    await runtime.engine.respond(inbound("hello"))
    with runtime.database.connect() as connection:
        session_id = connection.execute(text("SELECT id FROM sessions")).scalar_one()
    session = runtime.stores.sessions.get_session(session_id)
    assert session is not None
    tools = {tool.name: tool for tool in runtime.tools.all()}
    context = ToolContext(session, "ada", ChatAddress("web", "u1", "private"), group=False, call_id="c1")
    scheduled = await tools["schedule"].run(
        context, tools["schedule"].parse({"text": "tea", "in_seconds": 600})
    )
    assert not scheduled.is_error
    assert '"text": "tea"' in scheduled.content and '"due_local"' in scheduled.content
    with pytest.raises(BadTime, match="ISO 8601"):
        await tools["schedule"].run(context, tools["schedule"].parse({"text": "tea", "at": "yesterday"}))
    listed = await tools["list_schedules"].run(context, tools["list_schedules"].parse({}))
    assert '"tea"' in listed.content
    reminder_id = reminder_rows(runtime)[0][0]
    cancelled = await tools["cancel_schedule"].run(
        context, tools["cancel_schedule"].parse({"id": reminder_id})
    )
    assert '"cancelled": true' in cancelled.content
    assert tools["list_schedules"].read_only and not tools["schedule"].read_only


async def test_linked_accounts_share_private_reminders_and_unlink_leaves_each_where_it_was_set(
    runtimes: RuntimeFactory, tmp_path: Path
) -> None:
    runtime = runtimes(tmp_path, jobs_worker=False)
    engine = runtime.engine
    code_reply = await engine.respond(inbound("/link", lane="web", user_id="v"))
    code = code_reply.text.split("Your link code: ")[1].split()[0].strip("`")
    await engine.respond(inbound(f"/link {code}", lane="telegram", user_id="7"))
    await engine.respond(inbound("/remind 2030-12-24 09:00 call mum", lane="telegram", user_id="7"))

    # One person on two lanes: the web account sees the reminder set on Telegram.
    listed = await engine.respond(inbound("/reminders", lane="web", user_id="v"))
    assert "call mum" in listed.text
    before = reminder_rows(runtime)

    await engine.respond(inbound("/unlink", lane="telegram", user_id="7"))

    # Still the Telegram chat's reminder, where it was asked, whoever owns what now.
    assert reminder_rows(runtime) == before == [(before[0][0], "call mum", "scheduled", "telegram", None)]
    with runtime.database.connect() as connection:
        where = connection.execute(text("SELECT lane, chat_id FROM reminders")).one()
    assert tuple(where) == ("telegram", "7")
