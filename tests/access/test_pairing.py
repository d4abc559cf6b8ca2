"""Pairing for strangers in DMs, through the engine as every lane reaches it: one short message
with a code and nothing else, `/pair` by an admin, codes that expire, and a flood that stays bounded."""

from __future__ import annotations

import os
import subprocess
import sys
from datetime import timedelta
from pathlib import Path
from typing import Any

from sqlalchemy import func, select, update

from bot.runtime import Runtime
from bot.storage.models import Account, table_of, utcnow
from bot.storage.pairings import PAIRINGS
from tests.support.peers import needs_postgres
from tests.support.runtime import REPO_CONFIG, inbound

ADMIN = "777"
REPO = Path(__file__).resolve().parents[2]


def paired_runtime(runtimes: Any, tmp_path: Path, **overrides: Any) -> Runtime:
    runtime: Runtime = runtimes(tmp_path, channels_telegram_access_admins=[ADMIN], **overrides)
    return runtime


def stranger(text: str, user_id: str = "501", name: str = "Mallory") -> Any:
    return inbound(text, lane="telegram", user_id=user_id, display_name=name)


def count(runtime: Runtime, table: Any) -> int:
    with runtime.stores.database.connect() as connection:
        return int(connection.execute(select(func.count()).select_from(table)).scalar_one())


def code_in(text: str) -> str:
    return text.split("pairing code is ", 1)[1].split(":", 1)[0]


async def test_a_stranger_gets_one_code_and_nothing_else_until_an_admin_approves(
    runtimes: Any, tmp_path: Path
) -> None:
    runtime = paired_runtime(runtimes, tmp_path)
    engine = runtime.engine

    first = await engine.respond(stranger("hello?"))
    assert first.should_send and "pairing code is" in first.text
    code = code_in(first.text)
    # Again, or a command: nothing at all, and nothing of the stranger is stored.
    for text in ("anyone there?", "/help", f"/pair {code}"):
        later = await engine.respond(stranger(text))
        assert (later.kind, later.should_send) == ("refused", False)
    assert count(runtime, table_of(Account)) == 0

    listing = await engine.respond(inbound("/pair", lane="telegram", user_id=ADMIN, display_name="Olga"))
    assert code in listing.text and "Mallory" in listing.text
    approved = await engine.respond(
        inbound(f"/pair {code}", lane="telegram", user_id=ADMIN, display_name="Olga")
    )
    assert approved.kind == "command" and "Approved Mallory" in approved.text

    answered = await engine.respond(stranger("hello again"))
    assert answered.kind == "assistant" and answered.text


async def test_only_an_admin_may_pair(runtimes: Any, tmp_path: Path) -> None:
    runtime = paired_runtime(runtimes, tmp_path, channels_telegram_allowed_users=["502"])
    code = code_in((await runtime.engine.respond(stranger("hi"))).text)

    # An allow-listed member talks, but cannot approve anyone.
    refused = await runtime.engine.respond(inbound(f"/pair {code}", lane="telegram", user_id="502"))
    assert refused.kind == "error" and "Only an admin" in refused.text
    assert (await runtime.engine.respond(stranger("still me"))).kind == "refused"


async def test_an_expired_code_cannot_be_approved_and_the_stranger_gets_a_new_one(
    runtimes: Any, tmp_path: Path
) -> None:
    runtime = paired_runtime(runtimes, tmp_path)
    old = code_in((await runtime.engine.respond(stranger("hi"))).text)
    with runtime.stores.database.begin() as connection:
        connection.execute(update(PAIRINGS).values(expires_at=utcnow() - timedelta(seconds=1)))

    refused = await runtime.engine.respond(inbound(f"/pair {old}", lane="telegram", user_id=ADMIN))
    assert refused.kind == "error" and "may have expired" in refused.text
    renewed = await runtime.engine.respond(stranger("hi again"))
    assert "pairing code is" in renewed.text and code_in(renewed.text) != old
    assert runtime.stores.pairings.delete_expired() == 0  # the old row was replaced, not kept


async def test_a_flood_of_strangers_keeps_the_pending_codes_bounded_and_the_rate_per_lane(
    runtimes: Any, tmp_path: Path
) -> None:
    await flood(
        paired_runtime(runtimes, tmp_path, limits_pairing_pending_max=3, limits_pairing_codes_per_minute=5)
    )


@needs_postgres
async def test_a_flood_stays_bounded_on_postgres(postgres_url: str, runtimes: Any, tmp_path: Path) -> None:
    await flood(
        paired_runtime(
            runtimes,
            tmp_path,
            database_url=postgres_url,
            limits_pairing_pending_max=3,
            limits_pairing_codes_per_minute=5,
        )
    )


async def flood(runtime: Runtime) -> None:
    replies = [await runtime.engine.respond(stranger("let me in", user_id=str(9000 + n))) for n in range(40)]

    # Five codes a minute on the lane; the rest are told nothing and leave nothing behind.
    assert sum("pairing code is" in reply.text for reply in replies) == 5
    assert count(runtime, PAIRINGS) == 3
    assert count(runtime, table_of(Account)) == 0
    # The newest wait; the oldest were dropped.
    assert [pending.platform_user_id for pending in runtime.stores.pairings.pending()] == [
        "9002",
        "9003",
        "9004",
    ]


async def test_chorus_pair_approve_lets_the_stranger_in(runtimes: Any, tmp_path: Path) -> None:
    runtime = paired_runtime(runtimes, tmp_path)
    code = code_in((await runtime.engine.respond(stranger("hi"))).text)
    environment = {key: value for key, value in os.environ.items() if not key.startswith("CHORUS_")}
    environment.update(
        CHORUS_DATABASE_URL=runtime.settings.database_url, CHORUS_DATA_DIR=str(tmp_path / "data")
    )
    command = [sys.executable, "-m", "bot.cli", "--config", str(REPO_CONFIG), "pair"]

    listed = subprocess.run([*command, "list"], env=environment, capture_output=True, text=True, check=True)
    assert code in listed.stdout and "Mallory" in listed.stdout
    approved = subprocess.run(
        [*command, "approve", code], env=environment, capture_output=True, text=True, check=True, cwd=REPO
    )
    assert "Approved Mallory on telegram" in approved.stdout
    wrong = subprocess.run([*command, "approve", "NOPE42"], env=environment, capture_output=True, text=True)
    assert wrong.returncode == 1

    assert (await runtime.engine.respond(stranger("hi again"))).kind == "assistant"


async def test_a_web_visitor_who_linked_an_admins_account_is_an_admin(runtimes: Any, tmp_path: Path) -> None:
    runtime = paired_runtime(runtimes, tmp_path, channels_web_access_strangers="public")
    engine = runtime.engine
    visitor = inbound("hi", lane="web", user_id="visitor-1")
    assert (await engine.db.run(engine.access.admit, visitor)).audience == "public"
    await engine.respond(visitor)

    shown = await engine.respond(inbound("/link", lane="telegram", user_id=ADMIN, display_name="Olga"))
    code = shown.text.split("`")[1]
    linked = await engine.respond(inbound(f"/link {code}", lane="web", user_id="visitor-1"))
    assert linked.kind == "command", linked.text

    assert (
        await engine.db.run(engine.access.admit, inbound("hi", lane="web", user_id="visitor-1"))
    ).audience == ("admins")
