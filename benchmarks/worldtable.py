"""The table of the worlds scenario: one line per drawn world and client, then the drawn limits.

Each line gives the wall time (or the timeout that cut the run short), the
lower bound in that world and the host that sets it, their ratio, the 429s
per host with their share of that host's requests, the requests to the
per-article body routes against the articles those routes can serve, and the
rows left ``abandoned`` at the end of the first call.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from .report import ScenarioReport
from .worlds import SHORT_NAMES, DrawnHost, RetryAfter

__all__ = ["WORLD_RUNNERS", "format_worlds", "world_rows"]

WORLD_RUNNERS: tuple[str, ...] = ("pipeline", "chained")
"""The clients each drawn world runs, each cold with its own cache."""

_RUNNER_LABEL = {"pipeline": "run()", "chained": "chained"}


def _short(host: str) -> str:
    return SHORT_NAMES.get(host, host)


def _throttled(report: ScenarioReport) -> str:
    parts = []
    for host, n in sorted(report.throttled.items(), key=lambda item: -item[1]):
        seen = report.requests.get(host, 0)
        share = f" ({n / seen:.0%})" if seen else ""
        parts.append(f"{_short(host)} {n}{share}")
    return ", ".join(parts) or "0"


def _asked(politeness: Mapping[str, Any], name: str) -> str:
    routes = politeness.get("routes", {})
    can = politeness.get("servable", {})
    return f"{routes.get(name, 0)}/{can.get(name, 0)}"


def _abandoned(outcomes: Mapping[str, Any]) -> str:
    reasons: Mapping[str, int] = outcomes.get("abandoned", {})
    if not reasons:
        return "0"
    total = sum(reasons.values())
    top = "; ".join(f"{n} {reason}" for reason, n in list(reasons.items())[:3])
    more = " …" if len(reasons) > 3 else ""
    return f"{total}: {top}{more}"


def world_rows(reports: Sequence[ScenarioReport]) -> list[dict[str, Any]]:
    """Return one JSON-ready row per world run (what the table prints)."""
    rows = []
    for r in reports:
        world = r.world or {}
        binding = r.terms[0].host if r.terms and r.bound > 0 else "-"
        rows.append(
            {
                "world": world.get("seed"),
                "run": _RUNNER_LABEL.get(r.name, r.name),
                "wall": r.wall,
                "timed_out": r.error if r.wall is None else None,
                "bound": r.bound,
                "binding_host": binding,
                "ratio": r.ratio,
                "requests": sum(r.requests.values()),
                "throttled": dict(r.throttled),
                "throttled_share": {
                    h: n / r.requests[h] for h, n in r.throttled.items() if r.requests.get(h)
                },
                "routes": dict(r.politeness.get("routes", {})),
                "servable": dict(r.politeness.get("servable", {})),
                "abandoned": dict(r.outcomes.get("abandoned", {})),
            }
        )
    return rows


def _limits_line(seed: Any, hosts: Mapping[str, Mapping[str, Any]]) -> str:
    parts = []
    for host, h in hosts.items():
        drawn = DrawnHost(
            host,
            float(h["rate"]),
            int(h["in_flight"]),
            int(h["burst"]),
            RetryAfter(h["retry_after"]),
            h.get("long_wait"),
            bool(h.get("announces")),
        )
        parts.append(f"{_short(host)} {drawn.compact()}")
    return f"| {seed} | " + "; ".join(parts) + " |"


def format_worlds(reports: Sequence[ScenarioReport]) -> str:
    """Return the worlds scenario's summary as two Markdown tables (runs, then drawn limits)."""
    lines = [
        "== worlds: wall against each drawn world's bound",
        "| world | run | wall s | bound s (binds) | ratio | requests | 429s (share of host) "
        "| Springer JATS asked/servable | Elsevier asked/servable | EPMC fullTextXML "
        "asked/servable | abandoned after the first call |",
        "|---|---|---|---|---|---|---|---|---|---|---|",
    ]
    for r, row in zip(reports, world_rows(reports), strict=True):
        wall = f"{row['wall']:.1f}" if row["wall"] is not None else f"> ({row['timed_out']})"
        ratio = f"{row['ratio']:.1f}" if row["ratio"] is not None else "-"
        lines.append(
            f"| {row['world']} | {row['run']} | {wall} | {row['bound']:.2f} "
            f"({_short(row['binding_host'])}) | {ratio} | {row['requests']} | {_throttled(r)} "
            f"| {_asked(r.politeness, 'springer_jats')} | {_asked(r.politeness, 'elsevier')} "
            f"| {_asked(r.politeness, 'epmc_fulltext')} "
            f"| {_abandoned(r.outcomes) if r.outcomes else '- (no frame)'} |"
        )
    seen: dict[Any, Mapping[str, Any]] = {}
    for r in reports:
        if r.world is not None:
            seen.setdefault(r.world.get("seed"), r.world.get("hosts", {}))
    if seen:
        lines += [
            "",
            "drawn limits (rate/s, bN burst, fN in flight, RA: Retry-After no / acc(urate) / "
            "a fixed long wait, hdr: announces X-RateLimit-*)",
            "| world | limits |",
            "|---|---|",
        ]
        lines += [_limits_line(seed, hosts) for seed, hosts in seen.items()]
    return "\n".join(lines)
