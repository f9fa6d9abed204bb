"""A token bucket per principal: `rate` requests a second on average, bursts up to `burst`."""

from __future__ import annotations

import math
import threading
import time
from collections import OrderedDict
from collections.abc import Callable


class RateLimiter:
    """Buckets by key (a token's subject, or the client address without login), the least recent dropped first."""

    def __init__(self, rate_per_s: float, burst: int, *, max_keys: int = 10_000,
                 clock: Callable[[], float] = time.monotonic) -> None:
        """Refill `rate_per_s` tokens a second up to `burst`; remember at most `max_keys` principals."""
        self.rate = rate_per_s
        self.burst = float(burst)
        self.max_keys = max_keys
        self._clock = clock
        self._lock = threading.Lock()
        self._buckets: OrderedDict[str, tuple[float, float]] = OrderedDict()

    def take(self, key: str) -> float:
        """0 when the request may go on; else the seconds until it may (the Retry-After)."""
        now = self._clock()
        with self._lock:
            tokens, at = self._buckets.get(key, (self.burst, now))
            tokens = min(self.burst, tokens + (now - at) * self.rate)
            if tokens >= 1.0:
                self._buckets[key] = (tokens - 1.0, now)
                self._buckets.move_to_end(key)
                while len(self._buckets) > self.max_keys:
                    self._buckets.popitem(last=False)
                return 0.0
            self._buckets[key] = (tokens, now)
            return (1.0 - tokens) / self.rate


def retry_after(seconds: float) -> str:
    """A Retry-After header value: whole seconds, at least 1."""
    return str(max(1, math.ceil(seconds)))
