"""Drawn worlds: the limits the benchmark's fake enforces on hosts that publish none.

Nobody publishes a per-second limit for Unpaywall, Springer Nature, the
bioRxiv API or the publisher and repository download hosts, so a library can
only guess them, and a benchmark that enforced the library's own guesses could
never see a wrong one. Europe PMC and Elsevier publish 10/s (2026), and the
library paces them so; they are still drawn here, so a world may hold them to
less than they publish and the library must notice. A :class:`DrawnWorld`
instead draws, from a seed, for each of those hosts:

* a sustained rate, 2–20 requests per second;
* a cap on requests in flight, 1–8 (one more is answered 429 at once);
* a burst, 1 to the rate (requests that may arrive back to back);
* a ``Retry-After`` habit: absent, accurate (whole seconds until the host
  admits again, rounded up) or long (a fixed 5–20 s, whatever the bucket says);
* whether it announces ``X-RateLimit-Limit`` / ``-Remaining`` / ``-Reset``
  (Elsevier always does, as the real service documents; the others by draw).

The hosts that publish a limit keep it (NCBI 3/s, Semantic Scholar 1/s,
OpenAlex 100/s, Crossref's polite pool 10/s with 3 in flight, announced in its
``x-rate-limit-*`` headers), and the PMC bucket on S3 stays unthrottled, as
it is in reality. The library is told none of the drawn numbers.
"""

from __future__ import annotations

import enum
import random
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from tests.fakes.limits import HostLimit
from tests.fakes.world import (
    HOST_BIORXIV,
    HOST_BIORXIV_WWW,
    HOST_CROSSREF,
    HOST_EBI,
    HOST_ELSEVIER,
    HOST_NCBI,
    HOST_OPENALEX,
    HOST_PUBLISHER,
    HOST_REPOSITORY,
    HOST_S2,
    HOST_S3,
    HOST_SPRINGER,
    HOST_SPRINGER_LINK,
    HOST_UNPAYWALL,
)

__all__ = [
    "PUBLISHED",
    "PUBLISHED_CAPS",
    "SHORT_NAMES",
    "UNPUBLISHED",
    "DrawnHost",
    "DrawnWorld",
    "RetryAfter",
    "draw_world",
    "draw_worlds",
]

UNPUBLISHED: tuple[str, ...] = (
    HOST_EBI,
    HOST_UNPAYWALL,
    HOST_ELSEVIER,
    HOST_SPRINGER,
    HOST_BIORXIV,
    HOST_PUBLISHER,
    HOST_REPOSITORY,
    HOST_SPRINGER_LINK,
    HOST_BIORXIV_WWW,
)
"""The hosts whose limits a world draws (every host of the fake but S3 and the published ones)."""

RATE_RANGE = (2.0, 20.0)
IN_FLIGHT_RANGE = (1, 8)
LONG_WAIT_RANGE = (5, 20)
ANNOUNCE_SHARE = 1 / 3
"""The chance that an unpublished host (other than Elsevier) announces X-RateLimit-* headers."""

_TOO_MANY = {"message": "Too Many Requests"}

PUBLISHED: dict[str, HostLimit] = {
    # NCBI counts requests per second: three may arrive back to back.
    HOST_NCBI: HostLimit(
        per_second=3.0,
        burst=3,
        retry_after=True,
        body={"error": "API rate limit exceeded", "count": "4", "limit": "3"},
    ),
    HOST_S2: HostLimit(
        per_second=1.0,
        body={
            "message": "Too Many Requests. Please wait and try again or apply for a key for "
            "higher rate limits.",
            "code": "429",
        },
    ),
    HOST_OPENALEX: HostLimit(
        per_second=100.0,  # published for 2026 (limits-2026.md §2)
        burst=10,
        retry_after=True,
        body={"error": "Rate limit exceeded", "message": "Too many requests; slow down."},
    ),
    # The fake announces this in x-rate-limit-limit / x-rate-limit-interval.
    HOST_CROSSREF: HostLimit(
        per_second=10.0,
        burst=10,
        max_in_flight=3,
        retry_after=True,
        body={"status": "error", "message": "Too many requests"},
    ),
}
"""The limits of the hosts that publish theirs; the same in every world."""

PUBLISHED_CAPS: dict[str, int] = {HOST_S2: 1}
"""In-flight caps the bound adds to ``max_in_flight`` (Semantic Scholar serves one at a time)."""


class RetryAfter(enum.Enum):
    """What a drawn host sends in ``Retry-After`` with its 429."""

    ABSENT = "absent"
    ACCURATE = "accurate"
    LONG = "long"


@dataclass(frozen=True, slots=True)
class DrawnHost:
    """The limits drawn for one host."""

    host: str
    rate: float
    in_flight: int
    burst: int
    retry_after: RetryAfter
    long_wait: int | None
    announces: bool

    def limit(self) -> HostLimit:
        """The :class:`HostLimit` the fake enforces for this host."""
        return HostLimit(
            per_second=self.rate,
            burst=self.burst,
            max_in_flight=self.in_flight,
            retry_after=self.retry_after is RetryAfter.ACCURATE,
            fixed_retry_after=self.long_wait if self.retry_after is RetryAfter.LONG else None,
            announce=self.announces,
            body=_TOO_MANY,
        )

    def describe(self) -> str:
        """One line: rate, burst, in-flight cap, Retry-After habit, announced headers."""
        habit = f"long {self.long_wait} s" if self.long_wait else self.retry_after.value
        told = ", announces X-RateLimit-*" if self.announces else ""
        return (
            f"{self.host:<28} {self.rate:>5.1f}/s burst {self.burst:<2} "
            f"in flight {self.in_flight}  Retry-After {habit}{told}"
        )

    def compact(self) -> str:
        """A short form for tables: ``7.5/s b3 f2 RA:acc``."""
        habit = {RetryAfter.ABSENT: "no", RetryAfter.ACCURATE: "acc"}.get(
            self.retry_after, f"{self.long_wait}s"
        )
        return f"{self.rate:g}/s b{self.burst} f{self.in_flight} RA:{habit}" + (
            " hdr" if self.announces else ""
        )


@dataclass(frozen=True, slots=True)
class DrawnWorld:
    """Every host's limits for one seed: the published ones and the drawn ones."""

    seed: int
    drawn: tuple[DrawnHost, ...]

    def limits(self) -> dict[str, HostLimit]:
        """The limits the fake enforces, per host (S3 absent: unthrottled)."""
        return {**PUBLISHED, **{d.host: d.limit() for d in self.drawn}}

    def rates(self) -> dict[str, float]:
        """Requests per second per limited host, for the lower bound."""
        return {host: limit.per_second for host, limit in self.limits().items()}

    def caps(self) -> dict[str, int]:
        """Requests in flight per capped host, for the lower bound."""
        caps = {h: lim.max_in_flight for h, lim in self.limits().items() if lim.max_in_flight}
        return {**caps, **PUBLISHED_CAPS}

    def bursts(self) -> dict[str, int]:
        """Back-to-back requests per limited host, for the lower bound."""
        return {host: limit.burst for host, limit in self.limits().items()}

    def host(self, name: str) -> DrawnHost | None:
        """The drawn limits of ``name``, or ``None`` for a published or unthrottled host."""
        return next((d for d in self.drawn if d.host == name), None)

    def describe(self) -> str:
        """One line per drawn host, under a header naming the seed."""
        lines = [f"world {self.seed}:"]
        lines += [f"  {d.describe()}" for d in self.drawn]
        return "\n".join(lines)

    def compact(self, hosts: Mapping[str, str] | None = None) -> str:
        """The drawn limits on one line, hosts shortened by ``hosts`` (host -> label)."""
        names = hosts or {}
        return "; ".join(f"{names.get(d.host, d.host)} {d.compact()}" for d in self.drawn)

    def to_json(self) -> dict[str, Any]:
        """A JSON-ready record of the drawn limits."""
        return {
            "seed": self.seed,
            "hosts": {
                d.host: {
                    "rate": d.rate,
                    "burst": d.burst,
                    "in_flight": d.in_flight,
                    "retry_after": d.retry_after.value,
                    "long_wait": d.long_wait,
                    "announces": d.announces,
                }
                for d in self.drawn
            },
        }


def draw_world(seed: int) -> DrawnWorld:
    """Draw every unpublished host's limits from ``seed`` (the same seed, the same world)."""
    rng = random.Random(f"litfetch-bench-world-{seed}")
    drawn = []
    for host in UNPUBLISHED:
        rate = round(rng.uniform(*RATE_RANGE), 1)
        in_flight = rng.randint(*IN_FLIGHT_RANGE)
        burst = rng.randint(1, max(1, int(rate)))
        habit = rng.choice(list(RetryAfter))
        long_wait = rng.randint(*LONG_WAIT_RANGE) if habit is RetryAfter.LONG else None
        announces = host == HOST_ELSEVIER or rng.random() < ANNOUNCE_SHARE
        drawn.append(DrawnHost(host, rate, in_flight, burst, habit, long_wait, announces))
    return DrawnWorld(seed, tuple(drawn))


def draw_worlds(seed: int, count: int) -> list[DrawnWorld]:
    """Draw ``count`` worlds, seeds ``seed``, ``seed + 1``, …"""
    return [draw_world(seed + i) for i in range(count)]


SHORT_NAMES: dict[str, str] = {
    HOST_EBI: "EPMC",
    HOST_UNPAYWALL: "Unpaywall",
    HOST_ELSEVIER: "Elsevier",
    HOST_SPRINGER: "Springer",
    HOST_BIORXIV: "bioRxiv",
    HOST_PUBLISHER: "publisher",
    HOST_REPOSITORY: "repository",
    HOST_SPRINGER_LINK: "SpringerLink",
    HOST_BIORXIV_WWW: "bioRxiv-www",
    HOST_NCBI: "NCBI",
    HOST_S2: "S2",
    HOST_OPENALEX: "OpenAlex",
    HOST_CROSSREF: "Crossref",
    HOST_S3: "S3",
}
"""Short labels for tables."""
