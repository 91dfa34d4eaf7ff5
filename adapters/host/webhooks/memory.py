"""The delivery ids already accepted, per vendor, the newest ``size`` of them: a vendor's retry
or a person's redelivery of an accepted delivery (the same id) polls nothing again. An id is
remembered only once its delivery was accepted, so a redelivery of one that was refused (or
never arrived) is taken. In memory only: after a restart the first poll reads everything anyway.

Each id is kept as a 16-byte digest: GitHub's, GitLab's and Jira's ids are not signed, so a
replayed delivery could carry a huge one; the memory's size stays ``size`` x a few dozen bytes.
"""

from __future__ import annotations

import hashlib
import threading
from collections import OrderedDict

DEFAULT_SIZE = 10_000


class DeliveryMemory:
    def __init__(self, size: int = DEFAULT_SIZE):
        if size < 1:
            raise ValueError(f"a delivery memory holds at least one id, not {size}")
        self.size = size
        self._ids: OrderedDict[tuple[str, bytes], None] = OrderedDict()
        self._lock = threading.Lock()

    def remember(self, vendor: str, delivery: str) -> bool:
        """Remember ``delivery``; False when it was remembered already (a duplicate)."""
        key = (vendor, hashlib.blake2b(delivery.encode(), digest_size=16).digest())
        with self._lock:
            if key in self._ids:
                self._ids.move_to_end(key)
                return False
            self._ids[key] = None
            while len(self._ids) > self.size:
                self._ids.popitem(last=False)
            return True

    def __len__(self) -> int:
        with self._lock:
            return len(self._ids)
