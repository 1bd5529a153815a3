"""Turn one scenario's server log and client result into figures, text and JSON."""

from __future__ import annotations

import collections
import json
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from .model import RATES, HostBound
from .politeness import RAW

__all__ = ["PhaseReport", "ScenarioReport", "format_scenario", "write_json"]


@dataclass
class PhaseReport:
    """One step of a scenario: its wall time and what each host saw during it."""

    step: str
    wall: float
    requests: dict[str, int]
    throttled: dict[str, int]
    ideal: dict[str, int]
    bound: float
    outcomes: dict[str, Any] = field(default_factory=dict)

    @property
    def ratio(self) -> float | None:
        """Wall time over the lower bound (``None`` when the bound is zero)."""
        return self.wall / self.bound if self.bound > 0 else None


@dataclass
class ScenarioReport:
    """A scenario's headline figures, its per-step breakdown and per-host bound terms."""

    name: str
    n: int
    latency: float
    concurrency: int
    credentials: bool
    wall: float | None
    bound: float
    requests: dict[str, int]
    throttled: dict[str, int]
    ideal: dict[str, int]
    terms: list[HostBound]
    peak_rss_mb: float | None
    phases: list[PhaseReport] = field(default_factory=list)
    outcomes: dict[str, Any] = field(default_factory=dict)
    expected: dict[str, Any] = field(default_factory=dict)
    extra: dict[str, Any] = field(default_factory=dict)
    error: str | None = None
    rates: dict[str, float] = field(default_factory=dict)
    """The rate each host enforced (empty: :data:`benchmarks.model.RATES`)."""
    world: dict[str, Any] | None = None
    """The drawn world the run met (:meth:`benchmarks.worlds.DrawnWorld.to_json`), if any."""
    bound_kind: str = "per-item"
    """Which bound ``bound`` is: ``per-item`` (:func:`benchmarks.model.lower_bound` of the ideal
    ladder, Unpaywall priced per DOI) or ``batch-optimal`` (:func:`benchmarks.model.batch_optimal`
    under the published 2026 limits, the headline whenever a run covers every step)."""
    bound_host: str | None = None
    """The host that sets a batch-optimal ``bound``."""
    per_item_bound: float | None = None
    """The per-item bound, kept beside a batch-optimal headline (it flatters: a per-DOI
    Unpaywall term no longer sent makes it long)."""
    politeness: dict[str, Any] = field(default_factory=dict)
    """Per-host in-flight overflows and early retries, per-route requests against what the
    hosts can serve, and the rows left abandoned (see :func:`benchmarks.politeness.measure`)."""

    @property
    def ratio(self) -> float | None:
        """Wall time over the lower bound (``None`` when the bound is zero or the run failed)."""
        if self.wall is None or self.bound <= 0:
            return None
        return self.wall / self.bound

    def to_json(self) -> dict[str, Any]:
        """Return a JSON-ready dict of every figure."""
        data = asdict(self)
        data["ratio"] = self.ratio
        data["total_requests"] = sum(self.requests.values())
        data["total_429"] = sum(self.throttled.values())
        data["terms"] = [
            {**asdict(t), "seconds": t.seconds} for t in self.terms if t.requests or t.seconds
        ]
        data["phases"] = [{**asdict(p), "ratio": p.ratio} for p in self.phases]
        return data


def _fmt(value: float | None, spec: str = ".2f") -> str:
    return "-" if value is None else format(value, spec)


def format_scenario(report: ScenarioReport) -> str:
    """Return the human-readable block printed for one scenario."""
    lines = [
        f"== {report.name}: N={report.n}, latency={report.latency * 1000:.0f} ms, "
        f"concurrency={report.concurrency}, publisher keys={'yes' if report.credentials else 'no'}"
    ]
    if report.error:
        lines.append(f"   FAILED: {report.error}")
    if report.phases:
        lines.append(
            f"   {'step':<10}{'wall s':>9}{'requests':>10}{'429s':>6}{'bound s':>9}{'ratio':>7}"
        )
        for p in report.phases:
            lines.append(
                f"   {p.step:<10}{p.wall:>9.2f}{sum(p.requests.values()):>10}"
                f"{sum(p.throttled.values()):>6}{p.bound:>9.2f}{_fmt(p.ratio):>7}"
            )
    hosts = sorted(
        set(report.requests) | set(report.ideal) | set(report.throttled),
        key=lambda h: (-report.requests.get(h, 0), h),
    )
    terms = {t.host: t for t in report.terms}
    rates = report.rates or RATES
    if hosts:
        lines.append(
            f"   {'host':<36}{'requests':>9}{'ideal':>7}{'429s':>6}{'rate/s':>8}{'floor s':>9}"
            + ("  (ideal, floor: per-item)" if report.bound_kind == "batch-optimal" else "")
        )
        for h in hosts:
            t = terms.get(h)
            rate = rates.get(h)
            lines.append(
                f"   {h:<36}{report.requests.get(h, 0):>9}{report.ideal.get(h, 0):>7}"
                f"{report.throttled.get(h, 0):>6}{_fmt(rate, '.0f') if rate else 'free':>8}"
                f"{_fmt(t.seconds if t else 0.0):>9}"
            )
    busiest = report.terms[0].host if report.terms and report.bound > 0 else "-"
    label = "lower bound"
    if report.bound_kind == "batch-optimal":
        label, busiest = "batch-optimal bound", report.bound_host or "-"
    lines.append(
        f"   wall {_fmt(report.wall)} s | {label} {report.bound:.2f} s ({busiest}) | "
        f"ratio {_fmt(report.ratio)} | 429s {sum(report.throttled.values())} | "
        f"requests {sum(report.requests.values())} | peak RSS {_fmt(report.peak_rss_mb, '.0f')} MB"
    )
    if report.per_item_bound:
        ratio = report.wall / report.per_item_bound if report.wall is not None else None
        lines.append(
            f"   per-item bound (model.lower_bound, the 'ideal' column) "
            f"{report.per_item_bound:.2f} s, ratio {_fmt(ratio)}"
        )
    if report.outcomes:
        lines.append(f"   outcomes: {_compact(report.outcomes)}")
    if report.expected:
        lines.append(f"   ideal run finds: {_compact(report.expected)}")
    for key, value in report.politeness.items():
        if value and key not in RAW:
            lines.append(f"   {key}: {_compact(value) if isinstance(value, Mapping) else value}")
    for key, value in report.extra.items():
        lines.append(f"   {key}: {value}")
    return "\n".join(lines)


def _compact(data: Mapping[str, Any]) -> str:
    parts = []
    for k, v in data.items():
        if isinstance(v, Mapping):
            v = ", ".join(f"{ik}={iv}" for ik, iv in v.items())
            parts.append(f"{k}=[{v}]")
        else:
            parts.append(f"{k}={v}")
    return "; ".join(parts)


def counter_in(events: Iterable[tuple[str, float]], start: float, end: float) -> dict[str, int]:
    """Count ``(host, time)`` events with ``start <= time < end`` per host."""
    return dict(collections.Counter(h for h, t in events if start <= t < end))


def write_json(reports: Sequence[ScenarioReport], path: Path, meta: Mapping[str, Any]) -> None:
    """Write every scenario's figures to ``path`` (parents created)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    payload = {"meta": dict(meta), "scenarios": [r.to_json() for r in reports]}
    path.write_text(json.dumps(payload, indent=1, default=str), encoding="utf-8")
