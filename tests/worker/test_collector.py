"""`tuned_collector`: the heap frozen and the thresholds raised while a worker loops,
both restored when the last (nested) loop ends; cyclic garbage is still collected."""

from __future__ import annotations

import gc
import weakref

from framework.worker.collector import LOOP_THRESHOLDS, tuned_collector


class _Node:
    def __init__(self) -> None:
        self.me = self  # a cycle: only the cyclic collector frees it


def test_thresholds_and_freeze_are_set_inside_and_restored_after() -> None:
    before = gc.get_threshold()
    assert before != LOOP_THRESHOLDS
    with tuned_collector():
        assert gc.get_threshold() == LOOP_THRESHOLDS
        assert gc.get_freeze_count() > 0
        with tuned_collector():  # a second worker in the same process
            assert gc.get_threshold() == LOOP_THRESHOLDS
        # The inner exit neither unfreezes (frozen objects may still die by reference
        # counting meanwhile, so the count is not compared) nor lowers the thresholds.
        assert gc.get_threshold() == LOOP_THRESHOLDS and gc.get_freeze_count() > 0
    assert gc.get_threshold() == before
    assert gc.get_freeze_count() == 0


def test_cycles_made_while_looping_are_still_collected() -> None:
    with tuned_collector():
        node = _Node()
        gone = weakref.ref(node)
        del node
        assert gone() is not None  # reference counting alone cannot free a cycle
        gc.collect()
        assert gone() is None
