"""getUpdates long polling that confirms an update only once its message is stored.

Telegram keeps re-sending an update until a later getUpdates call passes an
`offset` above its id. aiogram's own polling confirms each update as soon as it
is handed out, so a crash before the message reached the database lost it; here
the offset only moves past updates whose message is stored (or that turned out
to need nothing), and a restarted process is sent the rest again.

Polling never ends on its own but for a conflict (another poller takes the updates). A
getUpdates call that fails for any other reason is retried with backoff while the lane
shows down; one update aiogram cannot read is logged and confirmed without the rest of
its batch, and one whose handling raises is logged and confirmed too.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable
from contextlib import suppress

from aiogram import Bot, Dispatcher
from aiogram.exceptions import (
    ClientDecodeError,
    TelegramConflictError,
    TelegramNetworkError,
    TelegramServerError,
)
from aiogram.methods import GetUpdates
from aiogram.types import Message, Update
from pydantic import ValidationError

from channels.reconnect import Backoff

log = logging.getLogger(__name__)

POLL_TIMEOUT = 25
# How long a lane that stops waits for updates it took to reach the database,
# and for Telegram to take the final offset.
STORE_WAIT_SECONDS = 5.0
RETRY_FIRST = 1.0
RETRY_MAX = 60.0
# Failures any network has now and then: a warning, not a traceback.
TRANSIENT = (TelegramNetworkError, TelegramServerError)


class UpdatePoller:
    def __init__(
        self,
        bot: Bot,
        dispatcher: Dispatcher,
        allowed_updates: list[str],
        on_conflict: Callable[[str], None] | None = None,
        on_down: Callable[[str], None] | None = None,
        on_up: Callable[[], None] | None = None,
        retry_first: float = RETRY_FIRST,
    ) -> None:
        self._bot = bot
        self._on_conflict = on_conflict
        self._on_down = on_down
        self._on_up = on_up
        self._backoff = Backoff(retry_first, RETRY_MAX)
        self._down = False
        self._dispatcher = dispatcher
        self._allowed = allowed_updates
        # Update ids handed to the dispatcher whose message is not stored yet.
        self._pending: dict[int, tuple[int, int] | None] = {}
        self._highest = -1
        self._progress = asyncio.Event()
        self._handlers: set[asyncio.Task[None]] = set()
        self._task: asyncio.Task[None] | None = None
        self._stopping = False
        self.confirmed_offset: int | None = None

    def start(self) -> None:
        self._task = asyncio.create_task(self._run(), name="telegram-polling")

    def stored(self, messages: list[Message]) -> None:
        """The messages are in the database: their updates may be confirmed."""
        keys = {(message.chat.id, message.message_id) for message in messages}
        for update_id, key in list(self._pending.items()):
            if key in keys:
                del self._pending[update_id]
        self._progress.set()

    @property
    def offset(self) -> int | None:
        """The offset that confirms everything stored: just below the oldest pending update."""
        if self._pending:
            return min(self._pending)
        return self._highest + 1 if self._highest >= 0 else None

    async def stop(self) -> None:
        """Stop taking updates, let the ones taken reach the database, confirm them."""
        self._stopping = True
        if self._task is not None:
            self._task.cancel()
            await asyncio.gather(self._task, return_exceptions=True)
            self._task = None
        with suppress(TimeoutError):
            async with asyncio.timeout(STORE_WAIT_SECONDS):
                while self._pending:
                    self._progress.clear()
                    await self._progress.wait()
        offset = self.offset
        if offset is not None and offset != self.confirmed_offset:
            # A zero-timeout call whose only purpose is the offset: it confirms, and
            # whatever it returns stays unconfirmed for the next process.
            with suppress(TelegramNetworkError, TelegramServerError, TelegramConflictError):
                await self._bot(
                    GetUpdates(offset=offset, timeout=0, limit=1, allowed_updates=self._allowed),
                    request_timeout=int(STORE_WAIT_SECONDS),
                )
                self.confirmed_offset = offset
        log.info("Telegram polling stopped; confirmed offset %s", self.confirmed_offset)

    async def wait_handlers(self, timeout: float) -> None:
        """Wait for updates being handled (their replies being delivered), up to `timeout`."""
        if self._handlers:
            await asyncio.wait(list(self._handlers), timeout=timeout)

    async def _run(self) -> None:
        # `stop` cancels this task; the flag ends the loop even if a cancellation
        # arriving together with a wake-up is swallowed on the way.
        while not self._stopping:
            offset = self.offset
            try:
                updates = await self._get_updates(offset)
            except TelegramConflictError as error:
                # Another poller (or a webhook) takes this bot's updates. Polling on would
                # only split the updates between the two: stop, and let the lane say why.
                if self._on_conflict is not None:
                    self._on_conflict(error.message)
                return
            except Exception as error:
                await self._retry_later(error)
                continue
            self._backoff.connected()
            if self._down:
                self._down = False
                log.info("getUpdates answers again; Telegram polling goes on")
                if self._on_up is not None:
                    self._on_up()
            self.confirmed_offset = offset
            fresh = [update for update in updates if update.update_id > self._highest]
            for update in fresh:
                self._take(update)
            if updates and not fresh:
                # Only updates still on their way to the database came back: wait
                # for one of them instead of asking again at once.
                self._progress.clear()
                with suppress(TimeoutError):
                    async with asyncio.timeout(1.0):
                        await self._progress.wait()

    async def _get_updates(self, offset: int | None) -> list[Update]:
        try:
            return await self._bot(
                GetUpdates(offset=offset, timeout=POLL_TIMEOUT, allowed_updates=self._allowed),
                request_timeout=POLL_TIMEOUT + 10,
            )
        except ClientDecodeError as error:
            # One update aiogram cannot read fails the whole batch: read them one at a time.
            return self._readable(error)

    def _readable(self, error: ClientDecodeError) -> list[Update]:
        """The updates of a batch aiogram could not read that it can read one by one; the
        others are logged once and confirmed with the next call, as if handled."""
        data = error.data
        if not (isinstance(data, dict) and data.get("ok") is True and isinstance(data.get("result"), list)):
            raise error
        updates = []
        for item in data["result"]:
            try:
                updates.append(Update.model_validate(item, context={"bot": self._bot}))
            except ValidationError:
                update_id = item.get("update_id") if isinstance(item, dict) else None
                if not isinstance(update_id, int):
                    raise error from None  # nothing to confirm it by: the batch is retried
                if update_id > self._highest:
                    log.exception("Telegram update %s cannot be read; it is left out", update_id)
                    self._highest = update_id
        return updates

    async def _retry_later(self, error: Exception) -> None:
        delay = self._backoff.next()
        described = (
            f"{error.message}: {error.original}" if isinstance(error, ClientDecodeError) else str(error)
        )
        reason = f"getUpdates failed ({type(error).__name__}: {described[:300]}); retrying in {delay:.0f} s"
        if isinstance(error, TRANSIENT):
            log.warning("%s", reason)
        else:
            log.error("%s", reason, exc_info=error)
        self._down = True
        if self._on_down is not None:
            self._on_down(reason)
        await asyncio.sleep(delay)

    def _take(self, update: Update) -> None:
        self._highest = max(self._highest, update.update_id)
        message = update.message
        self._pending[update.update_id] = (message.chat.id, message.message_id) if message else None
        task = asyncio.create_task(self._handle(update))
        self._handlers.add(task)
        task.add_done_callback(self._handlers.discard)

    async def _handle(self, update: Update) -> None:
        try:
            await self._dispatcher.feed_update(self._bot, update)
        except Exception:
            log.exception("Telegram update %s failed", update.update_id)
        finally:
            message = update.message
            # An album item only joins a collector here; its album's turn confirms it.
            if message is None or message.media_group_id is None:
                self._pending.pop(update.update_id, None)
                self._progress.set()
