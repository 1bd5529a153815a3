"""The published 2026 limits, pools, page sizes and quotas the fake enforces (issue 24, part 5).

Every figure comes from :data:`litfetch_df.limits.LIMITS` (the rows of
``shared/spec/limits-2026.md``), so the fake enforces what the services publish, not
what the library guesses; hosts that publish nothing keep their drawn / fixed
:class:`~tests.fakes.limits.HostLimit`. :class:`Rules2026` is pure state plus
arithmetic on a clock reading the caller passes, so it is tested without waiting.

Quotas count on the fake's clock, read as UTC seconds (``epoch`` is added to it):
daily ones reset at midnight UTC, Elsevier's is a rolling seven days.
"""

from __future__ import annotations

import collections
import math
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import urlencode

from litfetch_df.limits import published_limit, quota_calls, request_kind
from tests.fake_upstream import FakeRequest, FakeResponse
from tests.fakes.limits import HostGate, HostLimit

__all__ = ["Decision", "Rules2026", "parse_quotas"]

DAY = 86_400.0

OPENALEX_URL_MAX = 4_094
"""The longest path and query OpenAlex was observed to answer (pyalex#85, 2025-08)."""
WEEK = 7 * DAY

HOST_OPENALEX = "api.openalex.org"
HOST_CROSSREF = "api.crossref.org"
HOST_EBI = "www.ebi.ac.uk"
HOST_SPRINGER = "api.springernature.com"
HOST_ELSEVIER = "api.elsevier.com"
HOST_UNPAYWALL = "api.unpaywall.org"
HOST_NCBI = "pmc.ncbi.nlm.nih.gov"
HOST_S2 = "api.semanticscholar.org"

HOSTS: tuple[str, ...] = (
    HOST_OPENALEX,
    HOST_CROSSREF,
    HOST_EBI,
    HOST_SPRINGER,
    HOST_ELSEVIER,
    HOST_UNPAYWALL,
    HOST_NCBI,
    HOST_S2,
)
"""The hosts whose published rules replace the fixed / drawn limits when 2026 rules are on."""


def parse_quotas(text: str | None) -> dict[str, int]:
    """Parse ``unpaywall=50,openalex-keyless-list=5`` into quota overrides (calls per period)."""
    out: dict[str, int] = {}
    for part in (text or "").split(","):
        if not part.strip():
            continue
        name, _, value = part.partition("=")
        out[name.strip().lower()] = int(value)
    return out


@dataclass
class Decision:
    """What the rules say about one request: a refusal (or none), headers, and a release."""

    refusal: FakeResponse | None = None
    headers: dict[str, str] = field(default_factory=dict)
    release: list[HostGate] = field(default_factory=list)


def _gate(per_second: float, *, burst: int | None = None, in_flight: int = 0) -> HostGate:
    # a burst of one second's worth: the services count requests per second (or minute)
    b = burst if burst is not None else max(1, math.floor(per_second))
    # no jitter forgiven: the fake's clock is exact, and a published ceiling is a ceiling
    return HostGate(
        HostLimit(per_second=per_second, burst=b, max_in_flight=in_flight, tolerance=1e-9)
    )


class Rules2026:
    """The 2026 rules of the hosts that publish them, with quotas on the fake's clock.

    ``quotas`` overrides a quota in calls per period, by name: ``unpaywall``,
    ``springer``, ``elsevier``, ``openalex-keyed-list``, ``openalex-keyless-list``
    (a budget in list calls). ``epoch`` turns a clock reading into UTC seconds.
    """

    def __init__(self, quotas: Mapping[str, int] | None = None, *, epoch: float = 0.0):
        self.quotas = dict(quotas or {})
        self.epoch = epoch
        self._gates: dict[tuple[str, ...], HostGate] = {}
        self._used: collections.Counter[tuple[str, str, int]] = collections.Counter()
        self._elsevier: collections.deque[float] = collections.deque()
        self._minutes: dict[str, tuple[int, int]] = {}
        """Per host, the current UTC minute and the requests counted in it."""
        self.refused: collections.Counter[str] = collections.Counter()
        """Refusals per reason (``openalex-budget``, ``springer-premium``, …)."""

    # -- helpers -----------------------------------------------------------------------------

    def _g(self, key: tuple[str, ...], make: Callable[[], HostGate]) -> HostGate:
        gate = self._gates.get(key)
        if gate is None:
            gate = self._gates[key] = make()
        return gate

    def _admit(self, decision: Decision, gate: HostGate, now: float) -> bool:
        verdict = gate.admit(now)
        if verdict.admitted:
            decision.release.append(gate)
        return verdict.admitted

    def _minute_ok(self, host: str, per_minute: float, now: float) -> bool:
        # a per-minute limit is a window of the clock's minutes: at most ``per_minute`` in one
        minute = math.floor((now + self.epoch) / 60.0)
        seen, count = self._minutes.get(host, (minute, 0))
        if seen != minute:
            count = 0
        if count >= per_minute:
            return False
        self._minutes[host] = (minute, count + 1)
        return True

    def _day(self, now: float) -> int:
        return math.floor((now + self.epoch) / DAY)

    def seconds_to_midnight(self, now: float) -> int:
        """Whole seconds from ``now`` to the next midnight UTC (OpenAlex's ``Reset``)."""
        t = now + self.epoch
        return max(1, math.ceil((math.floor(t / DAY) + 1) * DAY - t))

    def _quota(self, name: str, default: int | None) -> int | None:
        return self.quotas.get(name, default)

    def _refuse(self, d: Decision, reason: str, status: int, body: Any, **headers: str) -> Decision:
        for gate in d.release:
            gate.release()
        d.release.clear()
        d.refusal = FakeResponse(status, body, {**d.headers, **headers})
        self.refused[reason] += 1
        return d

    # -- the rules ---------------------------------------------------------------------------

    def decide(self, host: str, req: FakeRequest, now: float) -> Decision | None:
        """Apply ``host``'s published rules to ``req`` at ``now``; ``None``: no rules for it."""
        params = {k: v[0] for k, v in req.query.items() if v}
        kind = request_kind(host, req.path, params)
        rule = {
            HOST_OPENALEX: self._openalex,
            HOST_CROSSREF: self._crossref,
            HOST_EBI: self._epmc,
            HOST_SPRINGER: self._springer,
            HOST_ELSEVIER: self._elsevier_rule,
            HOST_UNPAYWALL: self._unpaywall,
            HOST_NCBI: self._ncbi,
            HOST_S2: self._s2,
        }.get(host)
        if rule is None:
            return None
        return rule(req, params, kind, now)

    def _openalex(
        self, req: FakeRequest, params: dict[str, str], kind: str, now: float
    ) -> Decision:
        d = Decision()
        auth = req.headers.get("authorization", "")
        keyed = bool(params.get("api_key") or auth.lower().startswith("bearer "))
        tier = "keyed" if keyed else "keyless"
        row = published_limit(HOST_OPENALEX, "list" if kind == "list" else "single", tier)
        assert row is not None and row.budget_usd is not None and row.cost_usd is not None
        list_row = published_limit(HOST_OPENALEX, "list", tier)
        assert list_row is not None and list_row.cost_usd
        calls = self._quota(f"openalex-{tier}-list", quota_calls(list_row))
        budget = (calls or 0) * list_row.cost_usd
        cost = row.cost_usd
        day = self._day(now)
        spent = self._used[(HOST_OPENALEX, tier, day)] * list_row.cost_usd
        remaining = max(0.0, budget - spent)
        reset = str(self.seconds_to_midnight(now))
        # the call-count form of the budget (OpenAlex announces both): list calls left
        d.headers = {
            "X-RateLimit-Limit": str(calls),
            "X-RateLimit-Remaining": str(max(0, round(remaining / list_row.cost_usd))),
            "X-RateLimit-Credits-Used": "0",
            "X-RateLimit-Reset": reset,
            "x-ratelimit-limit-usd": f"{budget:.4f}",
            "x-ratelimit-remaining-usd": f"{remaining:.4f}",
            "x-ratelimit-cost-usd": f"{cost:.4f}",
        }
        gate = self._g((HOST_OPENALEX, tier), lambda: _gate(row.per_second or 100.0))
        if not self._admit(d, gate, now):
            return self._refuse(
                d,
                "openalex-rate",
                429,
                {"error": "Rate limit exceeded", "message": "Too many requests per second"},
                **{"Retry-After": "1"},
            )
        per_page = params.get("per_page") or params.get("per-page")
        if kind == "list" and per_page and per_page.isdigit() and int(per_page) > 100:
            return self._refuse(
                d,
                "openalex-per-page",
                400,
                {"error": "Invalid query parameters error.", "message": "per_page is 1 to 100"},
            )
        # OpenAlex's documented 100 OR values per filter, and the URL length it was observed
        # to refuse past (about 4,094 characters, pyalex#85)
        ors = max((v.count("|") + 1 for v in (params.get("filter") or "").split(",")), default=0)
        if kind == "list" and ors > 100:
            return self._refuse(
                d,
                "openalex-or-values",
                400,
                {"error": "Invalid query parameters error.", "message": "at most 100 OR values"},
            )
        if len(req.path) + len(urlencode(req.query, doseq=True)) + 1 > OPENALEX_URL_MAX:
            return self._refuse(d, "openalex-url", 414, {"error": "URI too long"})
        if cost > 0 and remaining + 1e-12 < cost:
            return self._refuse(
                d,
                "openalex-budget",
                429,
                {"error": "Rate limit exceeded", "message": "Insufficient budget"},
                **{"Retry-After": reset},
            )
        if cost > 0:
            self._used[(HOST_OPENALEX, tier, day)] += 1
            left = max(0.0, remaining - cost)
            d.headers["x-ratelimit-remaining-usd"] = f"{left:.4f}"
            d.headers["X-RateLimit-Remaining"] = str(round(left / list_row.cost_usd))
            d.headers["X-RateLimit-Credits-Used"] = "1"
        return d

    def _crossref(
        self, req: FakeRequest, params: dict[str, str], kind: str, now: float
    ) -> Decision:
        d = Decision()
        agent = req.headers.get("user-agent", "")
        polite = bool(params.get("mailto")) or "mailto:" in agent.lower()
        tier = "polite" if polite else "public"
        pool = "list" if kind == "list" else "single"
        row = published_limit(HOST_CROSSREF, pool, tier)
        assert row is not None and row.per_second is not None
        d.headers = {
            "x-api-pool": f"{tier}-{'array' if pool == 'list' else 'single'}",
            "x-rate-limit-limit": str(int(row.per_second)),
            "x-rate-limit-interval": "1s",
            "x-concurrency-limit": str(row.in_flight or 1),
        }
        rate, cap = row.per_second, row.in_flight or 0
        gate = self._g((HOST_CROSSREF, tier, pool), lambda: _gate(rate, in_flight=cap))
        if not self._admit(d, gate, now):
            body = {"status": "error", "message": "Too many requests"}
            if not polite:  # public-pool 429s were seen without a body or headers
                d.headers = {}
                return self._refuse(d, "crossref-rate", 429, b"")
            return self._refuse(d, "crossref-rate", 429, body, **{"Retry-After": "1"})
        return d

    def _epmc(self, req: FakeRequest, params: dict[str, str], kind: str, now: float) -> Decision:
        d = Decision()
        row = published_limit(HOST_EBI, "search" if kind == "search" else "fulltext")
        assert row is not None and row.per_second and row.per_minute
        per_s, per_min = row.per_second, row.per_minute
        second = self._g((HOST_EBI, "s"), lambda: _gate(per_s))
        # both windows must admit; the minute is checked first so a refusal costs no second slot
        if not self._minute_ok(HOST_EBI, per_min, now):
            return self._refuse(d, "epmc-minute", 429, {"message": "Too Many Requests"})
        if not self._admit(d, second, now):
            return self._refuse(d, "epmc-second", 429, {"message": "Too Many Requests"})
        return d

    def _springer(
        self, req: FakeRequest, params: dict[str, str], kind: str, now: float
    ) -> Decision:
        d = Decision()
        row = published_limit(HOST_SPRINGER, "fulltext" if kind == "fulltext" else "list", "basic")
        assert row is not None and row.per_minute and row.page_size
        size = params.get("p")
        if size and size.isdigit() and int(size) > row.page_size:
            return self._refuse(
                d,
                "springer-premium",
                403,
                {"status": "Fail", "message": "This is a premium feature"},
            )
        if not self._minute_ok(HOST_SPRINGER, row.per_minute, now):
            return self._refuse(
                d,
                "springer-rate",
                429,
                {"status": "Fail", "message": "You have exceeded the rate limit"},
            )
        quota = self._quota("springer", row.quota)
        day = self._day(now)
        if quota is not None and self._used[(HOST_SPRINGER, "basic", day)] >= quota:
            return self._refuse(
                d,
                "springer-daily",
                429,
                {"status": "Fail", "message": "You have exceeded your daily quota"},
            )
        self._used[(HOST_SPRINGER, "basic", day)] += 1
        return d

    def _elsevier_rule(
        self, req: FakeRequest, params: dict[str, str], kind: str, now: float
    ) -> Decision:
        d = Decision()
        row = published_limit(HOST_ELSEVIER, "fulltext", "keyed")
        assert row is not None and row.per_second and row.quota
        quota = self._quota("elsevier", row.quota) or 0
        window = self._elsevier
        while window and window[0] <= now - WEEK:
            window.popleft()
        reset = str(math.ceil((window[0] if window else now) + WEEK + self.epoch))
        per_s = row.per_second
        gate = self._g((HOST_ELSEVIER,), lambda: _gate(per_s))
        if len(window) >= quota:
            # a spent quota: Limit and Remaining are dropped, only Reset stays
            return self._refuse(
                d,
                "elsevier-weekly",
                429,
                b"",
                **{"X-ELS-Status": "QUOTA_EXCEEDED - Quota Exceeded", "X-RateLimit-Reset": reset},
            )
        d.headers = {
            "X-RateLimit-Limit": str(quota),
            "X-RateLimit-Remaining": str(quota - len(window)),
            "X-RateLimit-Reset": reset,
        }
        if not self._admit(d, gate, now):
            return self._refuse(d, "elsevier-rate", 429, b"")
        window.append(now)
        d.headers["X-RateLimit-Remaining"] = str(quota - len(window))
        return d

    def _unpaywall(
        self, req: FakeRequest, params: dict[str, str], kind: str, now: float
    ) -> Decision:
        d = Decision()
        row = published_limit(HOST_UNPAYWALL, "single")
        quota = self._quota("unpaywall", row.quota if row else None)
        day = self._day(now)
        if quota is not None and self._used[(HOST_UNPAYWALL, "any", day)] >= quota:
            return self._refuse(
                d,
                "unpaywall-daily",
                429,
                {"HTTP_status_code": 429, "error": True, "message": "daily limit reached"},
            )
        self._used[(HOST_UNPAYWALL, "any", day)] += 1
        return d

    def _ncbi(self, req: FakeRequest, params: dict[str, str], kind: str, now: float) -> Decision:
        d = Decision()
        tier = "keyed" if params.get("api_key") else "keyless"
        row = published_limit(HOST_NCBI, "list", tier)
        assert row is not None and row.per_second
        rate = row.per_second
        gate = self._g((HOST_NCBI, tier), lambda: _gate(rate))
        if not self._admit(d, gate, now):
            body = {"error": "API rate limit exceeded", "limit": str(int(rate))}
            return self._refuse(d, "ncbi-rate", 429, body, **{"Retry-After": "1"})
        return d

    def _s2(self, req: FakeRequest, params: dict[str, str], kind: str, now: float) -> Decision:
        d = Decision()
        row = published_limit(HOST_S2, "list" if kind == "list" else "single", "keyed")
        rate = row.per_second if row and row.per_second else 1.0
        gate = self._g((HOST_S2,), lambda: _gate(rate, in_flight=1))
        if not self._admit(d, gate, now):
            return self._refuse(d, "s2-rate", 429, {"message": "Too Many Requests.", "code": "429"})
        return d

    def used(self, host: str, now: float) -> int:
        """Calls counted against ``host``'s quota today (Elsevier: this rolling week)."""
        if host == HOST_ELSEVIER:
            return sum(1 for t in self._elsevier if t > now - WEEK)
        day = self._day(now)
        return sum(v for (h, _, d), v in self._used.items() if h == host and d == day)
