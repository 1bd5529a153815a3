"""What a host's answer says about its limits: the rate-limit headers, read (ADR 0007).

:func:`read_limits` turns one answer's headers into an :class:`Announced`: the rate
ceilings it names (Crossref's ``x-rate-limit-limit`` / ``-interval``, an IETF
``RateLimit-Policy`` of a minute or less, any ``X-RateLimit-Limit`` /
``RateLimit-Limit``), its in-flight ceiling (Crossref's ``x-concurrency-limit``) and
the windows it counts down (``X-RateLimit-Remaining`` / ``-Reset``, ``RateLimit-*``,
the IETF ``RateLimit`` ``r`` / ``t``). :func:`is_pace_signal` says whether an answer is
a throttle at all. ``Retry-After`` is read by :func:`litfetch_df.wire.http.parse_retry_after`.
Values that are not finite, negative or absurd read as absent (``sane_seconds``). What
to do with what was read is :mod:`litfetch_df.wire.limiter`'s business.
"""

from __future__ import annotations

import logging
import math
import re
from collections.abc import Mapping
from dataclasses import dataclass

from .http import sane_seconds

log = logging.getLogger("litfetch_df.limiter")

__all__ = [
    "BUDGET_HEADER_HOSTS",
    "SCALABLE_HOSTS",
    "Announced",
    "is_pace_signal",
    "read_limits",
]

SCALABLE_HOSTS: frozenset[str] = frozenset({"pmc-oa-opendata.s3.amazonaws.com"})
"""Hosts built for thousands of requests a second from one client (Amazon S3 serves the
PMC bucket): unpaced until they say otherwise (S3 answers 503 SlowDown)."""

BUDGET_HEADER_HOSTS = frozenset({"api.openalex.org"})
"""Hosts whose ``X-RateLimit-*`` count a daily budget of one request kind (OpenAlex's list
calls), not a rate window: holding the host on them would stop its free singletons too."""

_RATE_HEADERS = (
    "x-rate-limit-limit",
    "x-concurrency-limit",
    "x-ratelimit-remaining",
    "ratelimit-remaining",
    "ratelimit",
    "ratelimit-policy",
)


def is_pace_signal(
    host: str, status: int, headers: Mapping[str, str], slow_down: frozenset[int] = frozenset()
) -> bool:
    """Whether an answer asks the client to slow down (a throttle), not just failed.

    A 429, a domain's own "slow down" status (``slow_down``, e.g. OpenAlex's 403), a
    503 that says when to come back (``Retry-After``) or announces rate-limit headers,
    and Amazon S3's 503 SlowDown (:data:`SCALABLE_HOSTS`) are pace signals. Any other
    5xx (an outage, a 503 without ``Retry-After``) is a fault: it is retried with a
    back-off, and the pace the host has shown it admits stays.
    """
    if status == 429 or status in slow_down:
        return True
    if status != 503:
        return False
    names = {name.lower() for name in headers}
    return host in SCALABLE_HOSTS or "retry-after" in names or not names.isdisjoint(_RATE_HEADERS)


Window = tuple[float | None, float | None, float | None]
"""An announced window: requests left, seconds (or epoch) to its reset, its quota."""


@dataclass(frozen=True, slots=True)
class Announced:
    """What one answer's headers announce.

    ``rates`` are ceilings in requests/s in the order read (the last one stands);
    ``in_flight`` an in-flight ceiling (``None``: none announced); ``windows`` the
    counted windows; ``room`` whether any window says requests are left in it.
    """

    rates: tuple[float, ...] = ()
    in_flight: int | None = None
    windows: tuple[Window, ...] = ()

    @property
    def per_second(self) -> float | None:
        """The quota of a window that resets within a second: the host's own pace."""
        quotas = [q for left, reset, q in self.windows if q and reset is not None and reset <= 1]
        return min(quotas) if quotas else None

    @property
    def room(self) -> bool:
        """Whether a window says it still has requests left (a refusal then is concurrency)."""
        return any(left is not None and left >= 1 for left, _, _ in self.windows)


def read_limits(host: str, headers: Mapping[str, str]) -> Announced:
    """Read the rate-limit headers of one answer from ``host``."""
    rates: list[float] = []
    # Crossref: "x-rate-limit-limit: 50" per "x-rate-limit-interval: 1s", and
    # "x-concurrency-limit: 3": ceilings, never probed past.
    limit = _number(headers.get("x-rate-limit-limit"))
    interval = _seconds(headers.get("x-rate-limit-interval"))
    if limit and interval:
        rates.append(limit / interval)
    concurrency = _number(headers.get("x-concurrency-limit"))
    in_flight = int(concurrency) if concurrency and concurrency >= 1 else None
    # IETF: 'RateLimit-Policy: "default";q=100;w=60' is a ceiling of q per w seconds;
    # 'RateLimit: "default";r=0;t=30' is what is left of the window and when it resets.
    policy = _structured(headers.get("ratelimit-policy"))
    if policy is not None and policy.get("q") and 0 < policy.get("w", 0) <= 60:
        # A window of a minute or less is a pace (per_second / per_minute in the limits
        # table); a longer one is a quota, counted by what is left of it.
        rates.append(policy["q"] / policy["w"])
    windows: list[Window] = []
    left = _structured(headers.get("ratelimit"))
    if left is not None:
        windows.append((left.get("r"), left.get("t"), policy.get("q") if policy else None))
    for prefix in ("x-ratelimit-", "ratelimit-"):
        if prefix == "x-ratelimit-" and host in BUDGET_HEADER_HOSTS:
            continue  # a daily budget, not a window: the quota ledger reads it per kind
        windows.append(
            (
                _number(headers.get(prefix + "remaining")),
                _number(headers.get(prefix + "reset")),
                _number(headers.get(prefix + "limit")),
            )
        )
    for _, _, quota in windows:
        if quota and quota >= 1 and host not in BUDGET_HEADER_HOSTS:
            # Whatever the window, a host announcing n per window of a second or more
            # admits at most n a second: an upper bound, never below its real pace.
            rates.append(quota)
    return Announced(tuple(rates), in_flight, tuple(windows))


_DURATION = re.compile(r"^\s*(\d+(?:\.\d+)?)\s*(ms|s|m|h)?\s*$", re.IGNORECASE)
_PARAM = re.compile(r";\s*([a-z]+)\s*=\s*([0-9.]+)")


def _number(value: str | None) -> float | None:
    if value is None:
        return None
    try:
        number = float(value.strip())
    except ValueError:
        log.warning("ignoring a rate-limit header value that is not a number")
        return None
    if not math.isfinite(number) or number < 0:
        log.warning("ignoring a rate-limit header value %r", number)
        return None
    return number


def _seconds(value: str | None) -> float | None:
    """Read ``1s``, ``500ms``, ``2m`` or a bare number of seconds."""
    if value is None:
        return None
    match = _DURATION.match(value)
    if match is None:
        return None
    scale = {"ms": 0.001, "s": 1.0, "m": 60.0, "h": 3600.0}[(match.group(2) or "s").lower()]
    seconds = float(match.group(1)) * scale
    if sane_seconds(seconds, "rate-limit interval") is None:
        return None
    return seconds if seconds > 0 else None


def _structured(value: str | None) -> dict[str, float] | None:
    """The numeric parameters of the first item of an IETF ``RateLimit``/``-Policy`` field.

    ``"default";q=100;w=60`` gives ``{"q": 100, "w": 60}``; the older draft's
    ``100;w=60`` gives the leading number as ``q``. Unusable values are left out.
    """
    if not value:
        return None
    item = value.split(",")[0].strip()
    params: dict[str, float] = {}
    head = item.split(";")[0].strip()
    if head and not head.startswith('"'):
        quota = _number(head)
        if quota is not None:
            params["q"] = quota
    for name, raw in _PARAM.findall(item.lower()):
        number = _number(raw)
        if number is not None:
            params[name] = number
    if "w" in params and sane_seconds(params["w"], "rate-limit window") is None:
        del params["w"]
    return params
