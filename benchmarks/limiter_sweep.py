"""A sweep of the host limiter over drawn limits, on a virtual clock: seconds, not an hour.

``python -m benchmarks.limiter_sweep`` (or ``make bench-limiter``) sends ``--n``
requests through a window of ``--window`` to one host at a time, for every host
of ``--worlds`` drawn worlds (the draws of :mod:`benchmarks.worlds`, enforced by
the fake's own gate, :class:`tests.fakes.limits.HostGate`), in the four cases
that gate a limiter change: 200 and 1,665 requests, at 50 ms and at 300 ms
(``--n`` / ``--latency`` pick some). It reports each host's wall time against
its bound, its 429s (flagged past max(3, 1 %) of its requests) and the ceiling
the limiter learned, and the same wall against a *discovery floor*: the bound plus
one refusal's hold on each host whose limit nobody tells (see :func:`discovery_hold`).
Time is a :class:`tests.virtual_clock.VirtualClock`, so the
four sweeps of 45 hosts take a few minutes and give the same figures anywhere.

What the socket-served benchmark has and this does not is arrival jitter: a
busy client and server deliver two requests closer together than they were
sent. ``--jitter SHARE:SECONDS`` delays that share of the requests by up to
that many seconds (drawn uniformly) before the gate sees them; a limit that
allows no burst answers such a pair with a 429. The five-world bench behaves
like a share of a few per cent and up to 80 ms. ``--set NAME=VALUE`` overrides
a constant of ``litfetch_df.wire.limiter`` for an experiment.

The sweep judges the limiter alone: the frame's own work, the other hosts and
the pipeline's order are what ``make bench-worlds`` adds.
"""

from __future__ import annotations

import argparse
import asyncio
import concurrent.futures
import random
import statistics
import sys
from dataclasses import dataclass
from pathlib import Path

import httpx

ROOT = Path(__file__).resolve().parent.parent
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from benchmarks.worlds import SHORT_NAMES, DrawnHost, RetryAfter, draw_worlds  # noqa: E402
from litfetch_df import RetryPolicy, Session  # noqa: E402
from litfetch_df.wire import limiter as _limiter  # noqa: E402
from tests.fakes.limits import HostGate  # noqa: E402
from tests.virtual_clock import VirtualClock  # noqa: E402

__all__ = ["Outcome", "discovery_hold", "main", "sweep_host"]


@dataclass(frozen=True, slots=True)
class Outcome:
    """One host's run: its drawn limits, wall and bound (virtual seconds), 429s, ceiling."""

    host: DrawnHost
    n: int
    wall: float
    bound: float
    throttled: int
    failed: int
    ceiling: float
    hold: float = 0.0

    @property
    def ratio(self) -> float:
        """Wall time over the bound."""
        return self.wall / self.bound

    @property
    def floor_ratio(self) -> float:
        """Wall time over the discovery floor: the bound plus one refusal's hold."""
        return self.wall / (self.bound + self.hold)

    @property
    def share_429(self) -> float:
        """429s per request sent."""
        return self.throttled / max(1, self.n + self.throttled)


class _Host:
    """The fake host: a gate, a latency, and arrival jitter drawn per request."""

    def __init__(
        self, drawn: DrawnHost, clock: VirtualClock, latency: float, jitter: tuple[float, float]
    ) -> None:
        self.gate = HostGate(drawn.limit())
        self.clock = clock
        self.latency = latency
        self.share, self.most = jitter
        self.rng = random.Random(f"{drawn.host}-{drawn.rate}-{drawn.burst}")
        self.throttled = 0

    async def __call__(self, request: httpx.Request) -> httpx.Response:
        if self.share and self.rng.random() < self.share:
            await self.clock.sleep(self.rng.random() * self.most)
        verdict = self.gate.admit(self.clock.now())
        if not verdict.admitted:
            self.throttled += 1
            await self.clock.sleep(self.latency)
            return httpx.Response(429, headers=verdict.headers, json={"message": "slow down"})
        try:
            await self.clock.sleep(self.latency)
        finally:
            self.gate.release()
        return httpx.Response(200, headers=verdict.headers, json={"ok": True})


def sweep_host(
    drawn: DrawnHost,
    *,
    n: int = 1665,
    window: int = 32,
    latency: float = 0.05,
    jitter: tuple[float, float] = (0.05, 0.08),
) -> Outcome:
    """Send ``n`` requests to one drawn host through ``window`` at a time; return the outcome."""
    return asyncio.run(_sweep(drawn, n, window, latency, jitter))


async def _sweep(
    drawn: DrawnHost, n: int, window: int, latency: float, jitter: tuple[float, float]
) -> Outcome:
    clock = VirtualClock()
    host = _Host(drawn, clock, latency, jitter)

    def client() -> httpx.AsyncClient:
        return httpx.AsyncClient(transport=httpx.MockTransport(host))

    gate = asyncio.Semaphore(window)
    failed = 0
    async with Session(client_factory=client, retry=RetryPolicy(), clock=clock) as session:
        # The limiter alone is judged: the quota ledger would read the fake's per-second
        # X-RateLimit-* (Elsevier's) as the real service's weekly quota and defer rows.
        shared = session._shared
        shared.quota = None
        # Nor the published per-kind ceilings (limits.py): they would hold the drawn Europe
        # PMC and Elsevier hosts to their published 10/s whatever their drawn limits, and the
        # sweep judges what the limiter learns of a host (ADR 0007).
        if shared.sender is not None:
            shared.sender.budget = None
            shared.sender.ceilings = False

        async def one(k: int) -> None:
            nonlocal failed
            async with gate:
                try:
                    response = await session.get(f"https://{drawn.host}/sweep/{k}")
                    failed += response.status_code != 200
                except Exception:  # a parked host or a request given up: counted, not raised
                    failed += 1

        async def everything() -> None:
            await asyncio.gather(*(one(k) for k in range(n)))

        started = clock.now()
        await clock.run(everything())
        wall = clock.now() - started
        ceiling = session.limits[drawn.host].ceiling
    # The host takes `rate` a second, and `in_flight` requests of `latency` each at once.
    pace = min(drawn.rate, drawn.in_flight / latency)
    return Outcome(
        drawn,
        n,
        wall,
        n / pace,
        host.throttled,
        failed,
        ceiling,
        discovery_hold(drawn, latency, jitter),
    )


def discovery_hold(drawn: DrawnHost, latency: float, jitter: tuple[float, float]) -> float:
    """Seconds one refusal holds ``drawn``'s host, if any limiter must meet one; else 0.

    A limiter meets a refusal it cannot avoid when it must pass a limit to learn it: a
    rate under the politeness ceiling that the host does not announce, or a concurrency
    (never announced) too small for the pace it aims at; or when arrival jitter brings
    two requests closer than the host's burst allows, whatever the pace. It then obeys
    the hold the refusal names: a fixed ``Retry-After`` its seconds, an accurate one at
    least its one whole second, none at all nothing. The bound plus this hold is what
    the sweep calls the discovery floor: no limiter that is not told the limit does
    better on average, though one that stays under a limit by luck may on one host.
    """
    polite_rate = min(_limiter.UNLISTED_RATE, _limiter.UNLISTED_IN_FLIGHT / latency)
    aimed = drawn.rate if drawn.announces else polite_rate
    learns_rate = not drawn.announces and drawn.rate < polite_rate
    learns_cap = drawn.in_flight < _limiter.UNLISTED_IN_FLIGHT and drawn.in_flight / latency < aimed
    share, most = jitter
    tolerance = drawn.limit().tolerance
    jostled = share > 0 and most > (drawn.burst - 1) / drawn.rate + tolerance
    if not (learns_rate or learns_cap or jostled):
        return 0.0
    if drawn.retry_after is RetryAfter.LONG and drawn.long_wait:
        return float(drawn.long_wait)
    return 1.0 if drawn.retry_after is RetryAfter.ACCURATE else 0.0


def _parse_jitter(text: str) -> tuple[float, float]:
    share, _, most = text.partition(":")
    return float(share), float(most or 0.08)


CASES: tuple[tuple[int, float], ...] = ((200, 0.05), (200, 0.3), (1665, 0.05), (1665, 0.3))
"""The four cases that gate a limiter change (issue 25): a small table and Unpaywall's
1,665 requests, at a nearby service's latency and at a transatlantic one."""


def too_many_429s(outcome: Outcome) -> bool:
    """Whether a host drew more 429s than a run may cost: max(3, 1 % of its requests)."""
    return outcome.throttled > max(3, outcome.n // 100)


def _run(job: tuple[DrawnHost, int, int, float, tuple[float, float], list[str]]) -> Outcome:
    drawn, n, window, latency, jitter, sets = job
    _apply_sets(sets)
    return sweep_host(drawn, n=n, window=window, latency=latency, jitter=jitter)


def _apply_sets(sets: list[str]) -> None:
    for item in sets:
        name, _, value = item.partition("=")
        setattr(_limiter, name, type(getattr(_limiter, name))(float(value)))


def main(argv: list[str] | None = None) -> int:
    """Run the sweep from the command line; print a table and a summary per case; return 0."""
    p = argparse.ArgumentParser(prog="python -m benchmarks.limiter_sweep", description=__doc__)
    p.add_argument("--worlds", type=int, default=5, help="drawn worlds to sweep")
    p.add_argument("--world-seed", type=int, default=11, help="seed of the first world")
    p.add_argument("--n", type=int, help="requests per host (default: the four cases)")
    p.add_argument("--latency", type=float, help="seconds per answer (default: the four cases)")
    p.add_argument("--window", type=int, default=32, help="requests let through at once")
    p.add_argument("--jitter", default="0.05:0.08", help="SHARE:SECONDS of arrival jitter")
    p.add_argument("--jobs", type=int, default=1, help="processes to sweep hosts in")
    p.add_argument("--set", action="append", default=[], metavar="NAME=VALUE")
    args = p.parse_args(argv)
    for item in args.set:
        name, _, _ = item.partition("=")
        if not hasattr(_limiter, name):
            p.error(f"litfetch_df.wire.limiter has no {name}")
    _apply_sets(args.set)
    jitter = _parse_jitter(args.jitter)
    cases = [
        (n, latency)
        for n, latency in CASES
        if (args.n is None or n == args.n) and (args.latency is None or latency == args.latency)
    ] or [(args.n or 1665, args.latency or 0.05)]
    worlds = draw_worlds(args.world_seed, args.worlds)
    hosts = [(world.seed, drawn) for world in worlds for drawn in world.drawn]
    summary: list[str] = []
    for n, latency in cases:
        jobs = [(drawn, n, args.window, latency, jitter, args.set) for _, drawn in hosts]
        if args.jobs > 1:
            with concurrent.futures.ProcessPoolExecutor(args.jobs) as pool:
                outcomes = list(pool.map(_run, jobs))
        else:
            outcomes = [_run(job) for job in jobs]
        print(f"\n### n={n}, latency {latency * 1000:g} ms, jitter {args.jitter}\n")
        print(
            "| world | host | drawn limit | wall/bound | wall/floor | 429s (share) "
            "| ceiling/limit | failed |"
        )
        print("|---|---|---|---|---|---|---|---|")
        for (seed, drawn), out in zip(hosts, outcomes, strict=True):
            flag = " **!**" if too_many_429s(out) else ""
            print(
                f"| {seed} | {SHORT_NAMES.get(drawn.host, drawn.host)} | {drawn.compact()} "
                f"| {out.ratio:.2f} | {out.floor_ratio:.2f} "
                f"| {out.throttled} ({out.share_429:.1%}){flag} "
                f"| {out.ceiling / drawn.rate:.2f} | {out.failed} |",
                flush=True,
            )
        ratios = [o.ratio for o in outcomes]
        line = (
            f"n={n} @ {latency * 1000:g} ms: {len(outcomes)} hosts, wall/bound mean "
            f"{statistics.fmean(ratios):.3f}, max {max(ratios):.2f}, "
            f"over 1.5: {sum(r > 1.5 for r in ratios)}, "
            f"wall/floor mean {statistics.fmean(o.floor_ratio for o in outcomes):.3f}, "
            f"floor/bound mean {statistics.fmean(1 + o.hold / o.bound for o in outcomes):.3f}, "
            f"hosts over max(3, 1 %) 429s: {sum(too_many_429s(o) for o in outcomes)}, "
            f"429s total: {sum(o.throttled for o in outcomes)}, "
            f"failed: {sum(o.failed for o in outcomes)}"
        )
        summary.append(line)
        print("\n" + line, flush=True)
    print(f"\n## summary (window {args.window})\n")
    for line in summary:
        print("- " + line)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
