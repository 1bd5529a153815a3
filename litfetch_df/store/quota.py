"""Daily and weekly quotas as a budget: what each host has left, kept across runs.

A service's quota (OpenAlex's list budget, Unpaywall's 100,000 calls a day,
Springer Nature Basic's 500, Elsevier's 50,000 a week) is not an error to
meet but a budget to plan with. The :class:`QuotaLedger` counts the calls of
each metered host and request kind in the current period, takes what the host
announces it has left (``x-ratelimit-remaining-usd``, ``X-RateLimit-Remaining``)
over its own count, and notices when the host says the budget is spent. A
request to a spent budget is not sent: it raises :class:`QuotaDeferred`, whose
message (``<host> daily quota, resets in 5 h 12 min``) is what the row says
after ``deferred:``. With a cache directory the ledger is kept in
``quota.json`` there, so a second run the same day knows what remains.
"""

from __future__ import annotations

import contextlib
import datetime as dt
import json
import math
import os
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

from ..limits import Kind, Limit, published_limit, quota_calls, request_kind, tier_of
from ..wire.http import QuotaDeferred, get_logger
from .atomic import write_atomic

__all__ = ["QuotaDeferred", "QuotaLedger", "QuotaUse", "tier_of"]

log = get_logger(__name__)

LEDGER_FILE = "quota.json"


@dataclass(frozen=True, slots=True)
class QuotaUse:
    """One metered host and kind in the current period: calls made, calls left, the reset."""

    host: str
    kind: Kind
    tier: str
    period: str
    used: int
    quota: int | None
    remaining: int | None
    resets_at: float | None


def _period_key(period: str, now: float) -> str:
    day = dt.datetime.fromtimestamp(now, dt.UTC).date()
    if period == "week":
        year, week, _ = day.isocalendar()
        return f"{year}-W{week:02d}"
    return day.isoformat()


def _next_reset(period: str, now: float) -> float:
    moment = dt.datetime.fromtimestamp(now, dt.UTC)
    midnight = dt.datetime.combine(moment.date() + dt.timedelta(days=1), dt.time(), tzinfo=dt.UTC)
    if period == "week":
        midnight += dt.timedelta(days=(7 - moment.isoweekday()) % 7)
    return midnight.timestamp()


def _finite(value: str | None) -> float | None:
    if value is None:
        return None
    try:
        number = float(value.strip())
    except ValueError:
        return None
    return number if math.isfinite(number) and number >= 0 else None


def describe_wait(seconds: float) -> str:
    """``5 h 12 min`` / ``12 min`` / ``under a minute``: a wait as a row says it."""
    minutes = max(0, int(seconds // 60))
    hours, minutes = divmod(minutes, 60)
    if hours:
        return f"{hours} h {minutes} min"
    return f"{minutes} min" if minutes else "under a minute"


@dataclass(slots=True)
class _Entry:
    period: str
    used: int = 0
    remaining: int | None = None
    resets_at: float | None = None
    # Calls sent and not yet answered (never saved): counted as spent, so requests that
    # go out together cannot overdraw the budget between their check and their answer.
    pending: int = 0
    # Whether a refusal was logged this period (never saved): one warning, not one a row.
    warned: bool = False


class QuotaLedger:
    """The calls each metered host has left this period, counted and announced.

    ``directory`` (the cache directory, or ``None``) keeps the ledger across
    runs; ``now`` is the wall clock in epoch seconds (a test passes its own).
    ``quotas`` overrides the table's calls per period for a ``(host, kind)``
    (a plan with another allowance, or a scaled-down benchmark).
    """

    def __init__(
        self,
        directory: str | os.PathLike[str] | None = None,
        *,
        now: object = None,
        quotas: Mapping[tuple[str, str], int] | None = None,
    ) -> None:
        import time

        self._path = Path(directory) / LEDGER_FILE if directory is not None else None
        self._now = now if callable(now) else time.time
        self._quotas = dict(quotas or {})
        self._entries: dict[tuple[str, str, str], _Entry] = {}
        self._dirty = False
        self._load()

    # -- lookups ---------------------------------------------------------------------------

    def metered(self, host: str, path: str, params: Mapping[str, object] | None) -> Limit | None:
        """The table row that meters this request, or ``None`` when nothing is counted."""
        kind = request_kind(host, path, {k: str(v) for k, v in (params or {}).items()})
        limit = published_limit(host, kind, tier_of(host, params))
        if limit is None or limit.kind != kind or limit.period is None:
            return None
        if quota_calls(limit) is None and (host, kind) not in self._quotas:
            return None  # free calls of a metered host (OpenAlex singletons)
        return limit

    def _allowance(self, limit: Limit) -> int | None:
        return self._quotas.get((limit.host, limit.kind), quota_calls(limit))

    def _entry(self, limit: Limit) -> _Entry:
        assert limit.period is not None
        now = float(self._now())  # type: ignore[operator]
        period = _period_key(limit.period, now)
        key = (limit.host, limit.kind, limit.tier)
        entry = self._entries.get(key)
        if (
            entry is None
            or entry.period != period
            or (entry.resets_at is not None and now >= entry.resets_at)
        ):
            entry = _Entry(period=period)
            self._entries[key] = entry
        return entry

    def left(self, limit: Limit) -> int | None:
        """Calls left for this row's host and kind this period (``None``: unmetered)."""
        entry = self._entry(limit)
        allowance = self._allowance(limit)
        counted = None if allowance is None else max(0, allowance - entry.used)
        if entry.remaining is None:
            return counted
        return entry.remaining if counted is None else min(counted, entry.remaining)

    def check(self, host: str, path: str, params: Mapping[str, object] | None) -> None:
        """Raise :class:`QuotaDeferred` when this request's budget is spent; else nothing."""
        limit = self.metered(host, path, params)
        if limit is None:
            return
        left = self.left(limit)
        if left is not None and left <= 0:
            raise QuotaDeferred(self.reason(limit))

    def spent(self, host: str, path: str, params: Mapping[str, object] | None) -> bool:
        """Whether :meth:`reserve` would refuse this request now (nothing is held or sent).

        Calls sent and not yet answered count as spent, as they do for :meth:`reserve`:
        a caller that asks before sending learns what the request would meet.
        """
        limit = self.metered(host, path, params)
        if limit is None:
            return False
        left = self.left(limit)
        return left is not None and left - self._entry(limit).pending <= 0

    def reserve(self, host: str, path: str, params: Mapping[str, object] | None) -> None:
        """:meth:`check`, then hold one call of the budget until :meth:`observe` or
        :meth:`release` (raises :class:`QuotaDeferred` when none is left)."""
        limit = self.metered(host, path, params)
        if limit is None:
            return
        left = self.left(limit)
        entry = self._entry(limit)
        if left is not None and left - entry.pending <= 0:
            reason = self.reason(limit)
            if not entry.warned:
                entry.warned = True
                log.warning("%s: requests to it wait for the reset", reason)
            raise QuotaDeferred(reason)
        entry.pending += 1

    def release(self, host: str, path: str, params: Mapping[str, object] | None) -> None:
        """Give back a call :meth:`reserve` held for a request that got no answer."""
        limit = self.metered(host, path, params)
        if limit is not None:
            entry = self._entry(limit)
            entry.pending = max(0, entry.pending - 1)

    def reason_for(self, host: str, path: str, params: Mapping[str, object] | None) -> str:
        """The deferral reason of this request's metered budget."""
        limit = self.metered(host, path, params)
        return self.reason(limit) if limit is not None else f"{host} quota"

    def reason(self, limit: Limit) -> str:
        """``<host> daily quota, resets in 5 h 12 min``."""
        assert limit.period is not None
        entry = self._entry(limit)
        now = float(self._now())  # type: ignore[operator]
        resets = entry.resets_at or _next_reset(limit.period, now)
        word = "weekly" if limit.period == "week" else "daily"
        return f"{limit.host} {word} quota, resets in {describe_wait(resets - now)}"

    # -- updates ---------------------------------------------------------------------------

    def observe(
        self,
        host: str,
        path: str,
        params: Mapping[str, object] | None,
        status: int,
        headers: Mapping[str, str],
        body_head: bytes = b"",
    ) -> bool:
        """Count one answered request and read what the host says is left.

        Returns whether the answer says the budget is spent (a quota 429), in
        which case the caller defers instead of retrying.
        """
        limit = self.metered(host, path, params)
        if limit is None:
            return False
        entry = self._entry(limit)
        entry.used += 1
        entry.pending = max(0, entry.pending - 1)
        self._dirty = True
        now = float(self._now())  # type: ignore[operator]
        lowered = {k.lower(): v for k, v in headers.items()}
        usd = _finite(lowered.get("x-ratelimit-remaining-usd"))
        if usd is not None and limit.cost_usd:
            entry.remaining = int(usd / limit.cost_usd + 1e-9)
        elif (remaining := _finite(lowered.get("x-ratelimit-remaining"))) is not None and (
            host == "api.elsevier.com"
        ):
            entry.remaining = int(remaining)
        reset = _finite(lowered.get("x-ratelimit-reset"))
        if reset is not None:
            # OpenAlex counts seconds to midnight UTC; Elsevier gives an epoch.
            entry.resets_at = reset if reset > 10**9 else now + reset
        spent = status == 429 and _says_spent(lowered, body_head)
        if spent:
            entry.remaining = 0
            log.warning("%s", self.reason(limit))
        return spent

    def usage(self) -> tuple[QuotaUse, ...]:
        """What the ledger holds for this period, per metered host, kind and tier."""
        out = []
        for host, kind, tier in sorted(self._entries):
            limit = published_limit(host, kind, tier)  # type: ignore[arg-type]
            if limit is None or limit.tier != tier:
                continue
            current = self._entry(limit)
            out.append(
                QuotaUse(
                    host, limit.kind, tier, current.period, current.used,
                    self._allowance(limit), self.left(limit), current.resets_at,
                )
            )  # fmt: skip
        return tuple(out)

    # -- persistence -----------------------------------------------------------------------

    def _load(self) -> None:
        if self._path is None or not self._path.is_file():
            return
        try:
            raw = json.loads(self._path.read_text(encoding="utf-8"))
        except (OSError, ValueError):
            log.warning("quota ledger %s is unreadable; starting afresh", self._path.name)
            return
        for key, value in raw.get("entries", {}).items() if isinstance(raw, dict) else ():
            parts = key.split("|")
            if len(parts) != 3 or not isinstance(value, dict):
                continue
            with contextlib.suppress(TypeError, ValueError):
                self._entries[(parts[0], parts[1], parts[2])] = _Entry(
                    period=str(value["period"]),
                    used=int(value.get("used", 0)),
                    remaining=None if value.get("remaining") is None else int(value["remaining"]),
                    resets_at=None if value.get("resets_at") is None else float(value["resets_at"]),
                )

    def save(self) -> None:
        """Write the ledger to the cache directory (atomically); nothing without one."""
        if self._path is None or not self._dirty:
            return
        entries = {
            "|".join(key): {
                "period": e.period,
                "used": e.used,
                "remaining": e.remaining,
                "resets_at": e.resets_at,
            }
            for key, e in self._entries.items()
        }
        payload = json.dumps({"version": 1, "entries": entries}, indent=1).encode()
        try:
            write_atomic(self._path, payload)
        except OSError as exc:
            log.warning("quota ledger not saved: %s", type(exc).__name__)
            return
        self._dirty = False


def _says_spent(headers: Mapping[str, str], body_head: bytes) -> bool:
    """Whether a 429 means "budget spent" rather than "too fast"."""
    if "quota_exceeded" in headers.get("x-els-status", "").lower():
        return True
    usd = _finite(headers.get("x-ratelimit-remaining-usd"))
    if usd is not None and usd <= 0:
        return True
    text = body_head[:2048].lower()
    # "quota" alone is also how some hosts word a per-minute throttle; a day or a budget is not.
    words = (b"budget", b"quota exceeded", b"daily", b"per day", b"quota_exceeded")
    return any(word in text for word in words)
