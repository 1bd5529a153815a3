"""How one fake host decides whether to serve a request: a rate, a burst and an in-flight cap.

A :class:`HostLimit` is the policy; a :class:`HostGate` holds one host's state
and does the arithmetic, with the caller passing the clock reading, so the
decisions can be checked without waiting. The rate is a GCRA (the generic
cell rate algorithm, a token bucket written as one "theoretical arrival
time"): ``burst`` requests may arrive back to back, then one per
``1 / per_second`` seconds, with ``tolerance`` seconds of arrival jitter
forgiven. A request over the rate or over ``max_in_flight`` concurrent
requests is refused; the refusal carries ``Retry-After`` as the host's policy
says (absent, the whole seconds until the bucket admits again rounded up, or
a fixed value), and hosts that announce their limits send ``X-RateLimit-*``
headers on every answer.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any

__all__ = ["HostGate", "HostLimit", "Verdict"]


@dataclass(frozen=True, slots=True)
class HostLimit:
    """A rate / concurrency policy for one host, enforced the way the real service does.

    A request beyond ``per_second`` (GCRA: ``burst`` may arrive back to back,
    ``tolerance`` seconds of arrival jitter are forgiven) or beyond
    ``max_in_flight`` concurrent requests (0: no cap) gets ``status`` (429)
    with a JSON ``body``. ``retry_after`` adds a ``Retry-After`` header of
    the whole seconds until the host would admit the request (at least 1);
    ``fixed_retry_after`` sends that many seconds instead, whatever the
    bucket says. ``announce`` adds ``X-RateLimit-Limit`` (requests per
    second), ``X-RateLimit-Remaining`` and ``X-RateLimit-Reset`` (seconds
    until the bucket is full again) to every answer.
    """

    per_second: float
    burst: int = 1
    tolerance: float = 0.05
    max_in_flight: int = 0
    retry_after: bool = False
    status: int = 429
    body: Any = field(default_factory=lambda: {"message": "Too Many Requests"})
    fixed_retry_after: int | None = None
    announce: bool = False

    @property
    def interval(self) -> float:
        """Seconds between two requests at the sustained rate."""
        return 1.0 / self.per_second


@dataclass(frozen=True, slots=True)
class Verdict:
    """A gate's answer to one request: admitted, or refused with the headers to send."""

    admitted: bool
    headers: dict[str, str]
    over_in_flight: bool = False
    retry_after: float | None = None
    """The ``Retry-After`` sent with a refusal, in seconds (``None``: none sent)."""


@dataclass
class HostGate:
    """One host's limiter state: its GCRA arrival time and its requests in flight."""

    limit: HostLimit
    tat: float = float("-inf")
    in_flight: int = 0

    def admit(self, now: float) -> Verdict:
        """Decide on a request arriving at ``now``; an admitted one counts as in flight."""
        limit = self.limit
        interval = limit.interval
        slack = (limit.burst - 1) * interval + limit.tolerance
        busy = bool(limit.max_in_flight) and self.in_flight >= limit.max_in_flight
        if busy or now < self.tat - slack:
            # an in-flight refusal cannot know when a slot frees: it says "1"
            wait = self.tat - slack - now
            headers = self._announced(now)
            seconds: float | None = None
            if limit.fixed_retry_after is not None:
                seconds = float(limit.fixed_retry_after)
            elif limit.retry_after:
                seconds = float(max(1, math.ceil(wait)))
            if seconds is not None:
                headers["Retry-After"] = str(int(seconds))
            return Verdict(False, headers, over_in_flight=busy, retry_after=seconds)
        self.tat = max(self.tat, now) + interval
        self.in_flight += 1
        return Verdict(True, self._announced(now))

    def release(self) -> None:
        """Mark one admitted request as answered."""
        self.in_flight -= 1

    def remaining(self, now: float) -> int:
        """How many more requests the bucket would admit back to back at ``now``."""
        interval = self.limit.interval
        slack = (self.limit.burst - 1) * interval + self.limit.tolerance
        if self.tat == float("-inf"):
            return self.limit.burst
        return max(0, min(self.limit.burst, math.floor((now + slack - self.tat) / interval) + 1))

    def _announced(self, now: float) -> dict[str, str]:
        if not self.limit.announce:
            return {}
        full = 0.0 if self.tat == float("-inf") else max(0.0, self.tat - now)
        return {
            "X-RateLimit-Limit": str(max(1, math.floor(self.limit.per_second))),
            "X-RateLimit-Remaining": str(self.remaining(now)),
            "X-RateLimit-Reset": str(math.ceil(full)),
        }
