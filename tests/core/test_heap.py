"""Start-up objects are taken out of the garbage collector's walks."""

from __future__ import annotations

import gc

from bot.heap import freeze_startup_objects


def test_objects_alive_at_start_up_are_left_out_of_later_collections() -> None:
    walked_before = len(gc.get_objects())
    try:
        frozen = freeze_startup_objects()
        # What a full collection walks now: only objects made after the freeze.
        walked_after = len(gc.get_objects())
        assert frozen == gc.get_freeze_count() >= walked_before // 2
        assert walked_after < walked_before // 10
    finally:
        gc.unfreeze()
    assert gc.get_freeze_count() == 0
