"""The delivery memory: an id once, a duplicate after, per vendor, the oldest forgotten first."""

from __future__ import annotations

import pytest

from adapters.host.webhooks.memory import DeliveryMemory


def test_an_id_is_new_once_then_a_duplicate() -> None:
    memory = DeliveryMemory()
    assert memory.remember("github", "a")
    assert not memory.remember("github", "a")
    assert memory.remember("gitlab", "a")  # another vendor's id space


def test_the_memory_is_bounded_and_forgets_the_oldest() -> None:
    memory = DeliveryMemory(size=3)
    for delivery in "abcd":
        assert memory.remember("github", delivery)
    assert len(memory) == 3
    assert memory.remember("github", "a")  # forgotten: new again
    assert not memory.remember("github", "d")


def test_a_duplicate_is_kept_fresh() -> None:
    memory = DeliveryMemory(size=2)
    memory.remember("github", "a")
    memory.remember("github", "b")
    assert not memory.remember("github", "a")  # now the newest
    memory.remember("github", "c")  # forgets b, not a
    assert not memory.remember("github", "a")
    assert memory.remember("github", "b")


def test_a_memory_of_nothing_is_refused() -> None:
    with pytest.raises(ValueError, match="at least one id"):
        DeliveryMemory(size=0)


def test_a_huge_id_is_kept_as_a_digest() -> None:
    memory = DeliveryMemory(size=2)
    huge = "x" * 60_000  # an unsigned header a replayer may fill
    assert memory.remember("github", huge)
    assert not memory.remember("github", huge)
    assert memory.remember("github", huge[:-1] + "y")
    assert all(len(key[1]) == 16 for key in memory._ids)
