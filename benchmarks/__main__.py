"""``python -m benchmarks`` (``make bench``): speed and politeness against a fake of every upstream.

The parent process serves the synthetic world (``tests/fakes/world.py``) on
loopback with per-request latency and the per-host rate limits of
:data:`benchmarks.model.LIMITS`; each scenario's client runs in a child
process (``benchmarks.client``) through the public pandas surface. For each
scenario it prints requests per host, 429s received, wall time, the lower
bound of :mod:`benchmarks.model`, the ratio of the two and the client's peak
RSS, and writes everything to ``benchmarks/results/latest.json``.

(About 890 lines, over the project's 650: one runner per scenario family and the
report lines issue 24 asks for (batch-optimal, plan vs actual, quotas) share the
argument parsing and the fake's set-up; splitting the scenario runners into modules
of their own is left for a later change.)
"""

from __future__ import annotations

import argparse
import collections
import json
import os
import platform
import shutil
import subprocess
import sys
import tempfile
import time
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
if str(ROOT) not in sys.path:  # `tests.fakes.world` lives beside the package
    sys.path.insert(0, str(ROOT))

from benchmarks.client import (  # noqa: E402
    PIPELINE_STEPS,
    SCENARIO_STEPS,
    WORLD_KEYS,
    ledger_quotas,
    missing_surface,
    model_steps,
)
from benchmarks.convergence import compare, differing_rows, round_lines  # noqa: E402
from benchmarks.corpus import Corpus, generate  # noqa: E402
from benchmarks.model import (  # noqa: E402
    LIMITS,
    batch_optimal,
    expected_outcomes,
    ideal_requests,
    lower_bound,
    marginal_requests,
    published_bound,
    resolve_rows,
    servable,
)
from benchmarks.politeness import measure  # noqa: E402
from benchmarks.quota_audit import audit  # noqa: E402
from benchmarks.quota_audit import lines as audit_lines  # noqa: E402
from benchmarks.report import (  # noqa: E402
    PhaseReport,
    ScenarioReport,
    counter_in,
    format_scenario,
    write_json,
)
from benchmarks.worlds import DrawnWorld, draw_world, draw_worlds  # noqa: E402
from benchmarks.worldtable import WORLD_RUNNERS, format_worlds, world_rows  # noqa: E402
from tests.fake_upstream import FakeUpstream  # noqa: E402
from tests.fakes.faults import FaultPlan  # noqa: E402
from tests.fakes.rules2026 import Rules2026, parse_quotas  # noqa: E402
from tests.fakes.world import World  # noqa: E402

ALL_SCENARIOS = (
    "resolve",
    "bodies",
    "pipeline",
    "warm",
    "warm-subset",
    "warm-extended",
    "chained",
    "memory",
    "licence",
)
WARM_SCENARIOS = ("warm", "warm-subset", "warm-extended")
"""Scenarios that run over a cache already filled: no ideal request count, no bound."""
EXTRA_SCENARIOS = ("worlds", "faults", "dask")
"""Scenarios that run only when named (``all`` leaves them out)."""
# Which steps a scenario's headline figures cover (the rest is preparation).
PROGRESS_EVERY = 30.0
"""Seconds between the progress lines printed while a scenario runs."""

HEADLINE = {
    "resolve": ("resolve",),
    "bodies": ("bodies",),
    "pipeline": ("run",),
    "warm": ("run",),
    "warm-subset": ("run",),
    "warm-extended": ("run",),
    "chained": ("resolve", "bodies", "files", "licences"),
    "memory": ("run",),
    "dask": ("run",),
}

MEMORY_CEILING_MB = 300.0
"""Issue 14: ``df.lit.run()`` with ``out_dir`` at N=20,000 must peak under this."""


def _parse(argv: list[str] | None) -> argparse.Namespace:
    p = argparse.ArgumentParser(prog="python -m benchmarks", description=__doc__)
    p.add_argument("--n", type=int, default=2000, help="rows for resolve/bodies/pipeline/warm")
    p.add_argument("--memory-n", type=int, default=20000, help="rows for the out_dir scenario")
    p.add_argument("--licence-n", type=int, default=20000, help="corpus size for licences")
    p.add_argument("--latency", type=float, default=0.05, help="seconds added to every answer")
    p.add_argument("--concurrency", type=int, default=32, help="the .lit concurrency= value")
    p.add_argument(
        "--scenario",
        action="append",
        help=f"one of {', '.join(ALL_SCENARIOS)} or 'all' (repeatable, comma lists accepted)",
    )
    p.add_argument(
        "--warm-runs",
        type=int,
        default=3,
        help="times the warm scenario runs (each a fresh process); the median is reported",
    )
    p.add_argument("--seed", type=int, default=1)
    p.add_argument("--no-credentials", action="store_true", help="run without publisher keys")
    p.add_argument("--timeout", type=float, default=1800.0, help="per-scenario limit, seconds")
    p.add_argument(
        "--world-seed",
        type=int,
        default=None,
        help="run in the drawn world of this seed (limits of the hosts that publish none); "
        "the worlds scenario draws seeds S, S+1, ... (default 1 there)",
    )
    p.add_argument("--worlds", type=int, default=5, help="worlds the worlds scenario draws")
    p.add_argument(
        "--faults",
        type=float,
        default=0.0,
        help="fail this share (0-1) of every host's requests, in a drawn kind "
        "(the faults scenario: 0.2 when not given)",
    )
    p.add_argument("--fault-seed", type=int, default=None, help="seed of the faults (--seed)")
    p.add_argument(
        "--max-rounds", type=int, default=6, help="runs the faults scenario makes at most"
    )
    p.add_argument(
        "--faults-diff",
        default="",
        metavar="FILE",
        help="the faults scenario: write the rows that differ from the fault-free run "
        "(ids, and each differing cell clean and faulted) to FILE as JSON",
    )
    p.add_argument(
        "--run-timeout",
        type=float,
        default=0.0,
        help="limit per client run of the worlds scenario, seconds "
        "(0: 60 s + 10 x that world's bound, at most --timeout)",
    )
    p.add_argument(
        "--dask-workers",
        default="1,2,4",
        help="the dask scenario: LocalCluster sizes to run, worker processes (comma list)",
    )
    p.add_argument(
        "--dask-partitions", type=int, default=0, help="the dask scenario: 0 = 2 per worker"
    )
    p.add_argument(
        "--limits",
        choices=("fixed", "2026"),
        default="fixed",
        help="2026: the fake enforces the published 2026 limits, pools, page sizes and quotas "
        "(tests/fakes/rules2026.py, from litfetch_df.limits) on the hosts that publish them",
    )
    p.add_argument(
        "--quota",
        default="",
        help="scaled-down quotas with --limits 2026, e.g. unpaywall=50,openalex-keyless-list=5",
    )
    p.add_argument(
        "--jitter",
        type=float,
        default=0.2,
        help="each answer waits latency x uniform(1-j, 1+j), seeded by --seed (0: constant)",
    )
    p.add_argument("--json", default=str(ROOT / "benchmarks" / "results" / "latest.json"))
    args = p.parse_args(argv)
    chosen: list[str] = []
    for item in args.scenario or ["all"]:
        for name in item.split(","):
            name = name.strip()
            if name == "all":
                chosen.extend(ALL_SCENARIOS)
            elif name in ALL_SCENARIOS + EXTRA_SCENARIOS:
                chosen.append(name)
            else:
                known = ", ".join(ALL_SCENARIOS + EXTRA_SCENARIOS)
                p.error(f"unknown scenario {name!r}; choose from {known}")
    warm = [name for name in chosen if name in ("warm", "warm-subset")]
    if warm and "pipeline" not in chosen:
        chosen.insert(chosen.index(warm[0]), "pipeline")  # warm replays pipeline's cache
    args.scenarios = list(dict.fromkeys(chosen))
    if not 0.0 <= args.faults < 1.0:
        p.error("--faults must be in [0, 1)")
    try:
        args.dask_sizes = [int(w) for w in str(args.dask_workers).split(",") if w.strip()]
    except ValueError:
        p.error("--dask-workers takes a comma list of worker counts, e.g. 1,2,4")
    if not args.dask_sizes or min(args.dask_sizes) < 1:
        p.error("--dask-workers takes a comma list of worker counts, e.g. 1,2,4")
    return args


def _batch_optimal_lines(
    report: ScenarioReport, corpus: Corpus, *, credentials: bool, latency: float
) -> None:
    """Add requests per host beside the batch-optimal count, the bound from that plan under
    the published 2026 rates (wall ÷ bound), the 429 share per host, and Unpaywall requests
    against the DOIs OpenAlex does not know (issue 24 part 5)."""
    optimal = batch_optimal(corpus, credentials=credentials)
    floors = published_bound(optimal, latency=latency)
    bound = max(floors.values(), default=latency)
    hosts = sorted(set(optimal) | set(report.requests))
    report.extra["requests vs batch-optimal"] = ", ".join(
        f"{h} {report.requests.get(h, 0)}/{optimal.get(h, 0)}" for h in hosts
    )
    report.extra["429 share"] = (
        ", ".join(
            f"{h} {report.throttled.get(h, 0) / n:.1%}"
            for h, n in sorted(report.requests.items())
            if n and report.throttled.get(h, 0)
        )
        or "none"
    )
    report.extra["batch-optimal bound"] = f"{bound:.2f} s"
    if report.wall is not None:
        report.extra["wall / batch-optimal bound"] = f"{report.wall / bound:.1f}x"
    unknown = sum(1 for a in corpus.articles if a.doi and not a.in_openalex)
    report.extra["Unpaywall requests vs DOIs unknown to OpenAlex"] = (
        f"{report.requests.get('api.unpaywall.org', 0)} / {unknown}"
    )


PLAN_TOLERANCE = 0.15
"""Issue 24: the plan's request count per host within this share of what the run sends."""


def _plan_lines(report: ScenarioReport, record: Mapping[str, Any], fake: FakeUpstream) -> None:
    """Add ``run()``'s plan per host beside what the fake received, and the kinds received.

    A host is flagged ``OFF`` when the plan misses the requests received by more than
    :data:`PLAN_TOLERANCE` (a host the plan left out counts as off).
    """
    from litfetch_df.limits import request_kind

    planned: Mapping[str, int] = record.get("planned") or {}
    received = World.requests_per_host(fake)
    kinds: collections.Counter[str] = collections.Counter()
    for req in fake.requests():
        if req.host == "bench.control":
            continue
        params = {k: v[0] for k, v in req.query.items() if v}
        kinds[f"{req.host} {request_kind(req.host, req.path, params)}"] += 1
    cells, off = [], []
    for host in sorted(set(planned) | set(received)):
        plan, sent = int(planned.get(host, 0)), int(received.get(host, 0))
        miss = abs(plan - sent) / sent if sent else (1.0 if plan else 0.0)
        mark = ""
        if miss > PLAN_TOLERANCE:
            mark = " OFF"
            off.append(host)
        cells.append(f"{host} {plan}/{sent}{mark}")
    report.extra["plan vs actual (planned/received)"] = ", ".join(cells)
    report.extra["plan within 15% on"] = f"{len(cells) - len(off)} of {len(cells)} hosts" + (
        f" (off: {', '.join(off)})" if off else ""
    )
    report.extra["received by kind"] = ", ".join(f"{k} {n}" for k, n in sorted(kinds.items()))


def _quota_lines(
    report: ScenarioReport, predicted: Sequence[str], fake: FakeUpstream, quotas: str
) -> None:
    """Add the quotas ``plan()`` said the run would pass beside those the run spent (each
    ``--quota`` row whose requests received reached its calls)."""
    from litfetch_df.limits import request_kind

    received: collections.Counter[str] = collections.Counter()
    for req in fake.requests():
        params = {k: v[0] for k, v in req.query.items() if v}
        received[f"{req.host} {request_kind(req.host, req.path, params)}"] += 1
    spent = sorted(
        f"{host} {kind}"
        for (host, kind), calls in ledger_quotas(quotas).items()
        if received[f"{host} {kind}"] >= calls
    )
    report.extra["plan(): quotas the run would pass"] = ", ".join(predicted) or "none"
    report.extra["quotas the run spent"] = ", ".join(spent) or "none"
    foreseen = set(spent) <= set(predicted)
    report.extra["plan predicted the spent quotas"] = "yes" if foreseen else "no"


def _extras(args: argparse.Namespace) -> dict[str, Any]:
    """The fake's 2026 rules (``--limits 2026``, ``--quota``) and latency jitter."""
    extra: dict[str, Any] = {"jitter": args.jitter, "jitter_seed": args.seed}
    if args.limits == "2026":
        # the fake's clock is monotonic: the offset makes its quotas reset at real midnight UTC
        extra["rules"] = Rules2026(parse_quotas(args.quota), epoch=time.time() - time.monotonic())
    return extra


def _fault_plan(args: argparse.Namespace, share: float | None = None) -> FaultPlan | None:
    share = args.faults if share is None else share
    if share <= 0:
        return None
    return FaultPlan(share, seed=args.seed if args.fault_seed is None else args.fault_seed)


def _child(
    args: argparse.Namespace,
    name: str,
    n: int,
    port: int,
    fake: FakeUpstream | None = None,
    timeout: float | None = None,
    **extra: str,
) -> dict[str, Any]:
    with tempfile.NamedTemporaryFile(suffix=".json", delete=False) as tmp:
        result_path = Path(tmp.name)
    cmd = [
        sys.executable,
        "-m",
        "benchmarks.client",
        "--port",
        str(port),
        "--scenario",
        name,
        "--n",
        str(n),
        "--seed",
        str(args.seed),
        "--concurrency",
        str(args.concurrency),
        "--result",
        str(result_path),
    ]
    if not args.no_credentials and name != "memory":
        cmd.append("--credentials")
    for key, value in extra.items():
        cmd += [f"--{key.replace('_', '-')}", value]
    path = os.pathsep.join(p for p in (str(ROOT), os.environ.get("PYTHONPATH", "")) if p)
    env = {**os.environ, "PYTHONPATH": path}
    limit = args.timeout if timeout is None else timeout
    started = time.monotonic()
    proc = subprocess.Popen(cmd, cwd=ROOT, env=env)
    try:
        while True:
            try:
                proc.wait(timeout=min(PROGRESS_EVERY, max(0.1, limit - elapsed_since(started))))
                break
            except subprocess.TimeoutExpired:
                elapsed = elapsed_since(started)
                if elapsed >= limit:
                    proc.kill()
                    proc.wait()
                    return {"error": f"timed out after {limit:.0f} s", "timed_out": limit}
                if fake is not None:
                    seen = World.requests_per_host(fake).most_common(6)
                    shown = ", ".join(f"{h}={c}" for h, c in seen) or "no requests yet"
                    print(f"   ... {elapsed:.0f} s: {shown}", file=sys.stderr, flush=True)
        loaded: dict[str, Any] = json.loads(result_path.read_text(encoding="utf-8"))
        return loaded
    except (OSError, ValueError) as exc:
        return {"error": f"no result from the client process: {exc}"}
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
        result_path.unlink(missing_ok=True)


def elapsed_since(started: float) -> float:
    """Seconds on the monotonic clock since ``started``."""
    return time.monotonic() - started


def _window(world: World, step: str) -> tuple[float, float] | None:
    marks = dict(world.marks)
    start, end = marks.get(f"start:{step}"), marks.get(f"end:{step}")
    return (start, end) if start is not None and end is not None else None


def _phase_ideal(
    corpus: Corpus, name: str, phase: str, *, credentials: bool
) -> collections.Counter[str]:
    """The ideal requests one phase of a scenario adds after the phases before it."""
    phases = SCENARIO_STEPS[name]
    before = [s for p in phases[: phases.index(phase)] for s in model_steps(p)]
    if len(model_steps(phase)) == 1:
        return marginal_requests(corpus, [*before, phase], phase, credentials=credentials)
    after = ideal_requests(corpus, [*before, *model_steps(phase)], credentials=credentials)
    if before:
        after.subtract(ideal_requests(corpus, before, credentials=credentials))
    return +after


def _bound_limits(world: DrawnWorld | None) -> dict[str, Any]:
    """The keyword arguments of :func:`lower_bound` for a drawn world (none: the fixed limits)."""
    if world is None:
        return {}
    return {"rates": world.rates(), "caps": world.caps(), "bursts": world.bursts()}


def _batch_bound(
    args: argparse.Namespace, corpus: Corpus, steps: Sequence[str], *, credentials: bool
) -> tuple[float, str] | None:
    """The batch-optimal bound and the host setting it, when ``steps`` are the whole pipeline
    under the published 2026 rules (issue 24's headline); else ``None`` (the per-item bound
    stays the headline: a step alone has no batch-optimal count, the fixed world no published
    rates)."""
    if args.limits != "2026" or set(steps) != set(PIPELINE_STEPS):
        return None
    floors = published_bound(batch_optimal(corpus, credentials=credentials), latency=args.latency)
    if not floors:
        return None
    host = max(floors, key=lambda h: floors[h])
    return floors[host], host


def world_bound(args: argparse.Namespace, name: str, world: DrawnWorld | None) -> tuple[float, str]:
    """Return a scenario's lower bound in ``world`` and the host that sets it."""
    n = args.memory_n if name == "memory" else args.n
    credentials = not args.no_credentials and name != "memory"
    corpus = generate(n, seed=args.seed)
    steps = [s for phase in HEADLINE[name] for s in model_steps(phase)]
    ideal = ideal_requests(corpus, steps, credentials=credentials)
    bound, terms = lower_bound(
        ideal, latency=args.latency, concurrency=args.concurrency, **_bound_limits(world)
    )
    return bound, (terms[0].host if terms else "-")


def run_requests_scenario(
    args: argparse.Namespace,
    name: str,
    cache_dir: Path,
    *,
    world: DrawnWorld | None = None,
    timeout: float | None = None,
    workers: int = 1,
    facts_out: dict[str, Any] | None = None,
) -> ScenarioReport:
    """Serve the world, run one request-making scenario's client, and measure it.

    ``world`` replaces the fixed limits of the hosts that publish none with
    drawn ones (and the bound uses them); ``timeout`` bounds the client run.
    ``workers`` (the dask scenario) is the LocalCluster's size: each worker's
    session has ``--concurrency`` requests out, so the bound's latency terms
    divide by ``workers`` times that; the rate terms do not change.
    ``facts_out``, when given, receives the run's fact columns row by row
    (:func:`benchmarks.client.row_facts`).
    """
    n = args.memory_n if name == "memory" else args.n
    credentials = not args.no_credentials and name != "memory"
    corpus = generate(n, seed=args.seed)
    fake_world = World(corpus.articles, keys=WORLD_KEYS)
    fake = FakeUpstream().start()
    limits = world.limits() if world is not None else LIMITS
    fake_world.install(
        fake, latency=args.latency, limits=limits, faults=_fault_plan(args), **_extras(args)
    )
    bound_limits = _bound_limits(world)
    extra: dict[str, str] = {}
    out_dir: Path | None = None
    if name in ("pipeline", "warm", "warm-subset"):
        extra["cache"] = str(cache_dir)
    if name == "warm-extended":
        extra["cache"] = str(cache_dir / "extended")  # its own cold run fills it first
    if name == "chained":
        extra["cache"] = str(cache_dir / "chained")  # cold, like pipeline: its own cache
    if name == "memory":
        out_dir = Path(tempfile.mkdtemp(prefix="litfetch-bench-out-"))
        extra["out_dir"] = str(out_dir)
    parallel = args.concurrency
    if args.quota:
        extra["quota"] = args.quota
    if facts_out is not None:
        extra["row_facts"] = "1"
    if name == "dask":
        extra["cache"] = str(cache_dir / f"dask-{workers}")  # cold: its own cache
        extra["workers"] = str(workers)
        extra["partitions"] = str(args.dask_partitions)
        parallel = args.concurrency * workers
    try:
        result = _child(args, name, n, fake.port, fake, timeout, **extra)
    finally:
        fake.stop()
        if out_dir is not None:
            shutil.rmtree(out_dir, ignore_errors=True)
    if facts_out is not None:
        facts_out.update(result.get("row_facts") or {})
    phases: list[PhaseReport] = []
    windows: list[tuple[float, float]] = []
    for phase in result.get("phases", []):
        step = phase["step"]
        window = _window(fake_world, step)
        if window is None:
            continue
        windows.append(window)
        marginal = _phase_ideal(corpus, name, step, credentials=credentials)
        ideal = {} if name in WARM_SCENARIOS else dict(marginal)
        bound, _ = lower_bound(ideal, latency=args.latency, concurrency=parallel, **bound_limits)
        whole = _batch_bound(args, corpus, model_steps(step), credentials=credentials)
        if whole is not None and name not in WARM_SCENARIOS and name != "memory":
            bound = whole[0]
        phases.append(
            PhaseReport(
                step=step,
                wall=float(phase["wall"]),
                requests=dict(World.requests_per_host(fake, since=window[0], until=window[1])),
                throttled=counter_in(fake_world.throttle_log, *window),
                ideal=ideal,
                bound=bound,
                outcomes=phase.get("outcomes", {}),
            )
        )
    headline = [p for p in phases if p.step in HEADLINE[name]]
    steps = [s for phase in HEADLINE[name] for s in model_steps(phase)]
    ideal = (
        {}
        if name in WARM_SCENARIOS
        else dict(ideal_requests(corpus, steps, credentials=credentials))
    )
    bound, terms = lower_bound(ideal, latency=args.latency, concurrency=parallel, **bound_limits)
    per_item: float | None = None
    batch = None
    if name not in WARM_SCENARIOS and name != "memory":
        batch = _batch_bound(args, corpus, steps, credentials=credentials)
    if batch is not None:
        per_item, bound = bound, batch[0]
    requests: dict[str, int] = {}
    throttled: dict[str, int] = {}
    for p in headline:
        for h, c in p.requests.items():
            requests[h] = requests.get(h, 0) + c
        for h, c in p.throttled.items():
            throttled[h] = throttled.get(h, 0) + c
    if not headline and "timed_out" in result:
        # a run cut short still shows what it did to the hosts
        requests = dict(World.requests_per_host(fake))
        throttled = dict(fake_world.throttled)
    report = ScenarioReport(
        name=name,
        n=n,
        latency=args.latency,
        concurrency=args.concurrency,
        credentials=credentials,
        wall=sum(p.wall for p in headline) if headline else None,
        bound=bound,
        requests=requests,
        throttled=throttled,
        ideal=ideal,
        terms=terms,
        peak_rss_mb=result.get("peak_rss_mb"),
        phases=phases,
        outcomes=result.get("outcomes", {}),
        expected=expected_outcomes(corpus, credentials=credentials) if name != "resolve" else {},
        error=result.get("error"),
        rates=dict(bound_limits.get("rates", {})),
        world=world.to_json() if world is not None else None,
        bound_kind="per-item" if batch is None else "batch-optimal",
        bound_host=None if batch is None else batch[1],
        per_item_bound=per_item,
    )
    if world is not None:
        report.politeness = measure(
            fake_world,
            fake,
            servable=servable(corpus, credentials=credentials),
            outcomes=report.outcomes,
        )
    if name not in WARM_SCENARIOS and name != "memory":
        _batch_optimal_lines(report, corpus, credentials=credentials, latency=args.latency)
    if result.get("requests_record"):
        _plan_lines(report, result["requests_record"], fake)
    if "plan_runs_out" in result:
        _quota_lines(report, result["plan_runs_out"], fake, args.quota)
    if fake_world.faulted:
        report.extra["faults injected"] = _compact_counts(fake_world.fault_kinds)
    if "traceback" in result:
        report.extra["traceback"] = "\n" + result["traceback"]
    if "out_dir_files" in result:
        report.extra["files written to out_dir"] = result["out_dir_files"]
    if name == "memory":
        report.extra.update(memory_lines(result))
    if name == "dask":
        report.name = f"dask ({workers} worker{'s' if workers > 1 else ''})"
        report.extra.update(dask_lines(result))
    return report


def run_quota_pair(
    args: argparse.Namespace, cache_dir: Path, world: DrawnWorld | None
) -> list[ScenarioReport]:
    """The pipeline with ``--quota`` spent, then the same corpus with no quota spent; the
    first report gains the row-by-row audit of :mod:`benchmarks.quota_audit` and the wall
    against the unspent world's bound (issue 24: within 3x of it)."""
    spent_facts: dict[str, Any] = {}
    unspent_facts: dict[str, Any] = {}
    spent = run_requests_scenario(args, "pipeline", cache_dir, world=world, facts_out=spent_facts)
    clean = argparse.Namespace(**{**vars(args), "quota": ""})
    (cache_dir / "unspent").mkdir(exist_ok=True)  # its own ledger: nothing spent in it
    unspent = run_requests_scenario(
        clean, "pipeline", cache_dir / "unspent", world=world, facts_out=unspent_facts
    )
    unspent.name = "pipeline (quotas unspent)"
    hosts = [
        item.split()[0]
        for item in str(spent.extra.get("quotas the run spent", "")).split(", ")
        if item and item != "none"
    ]
    if spent_facts and unspent_facts:
        resolved, _ = resolve_rows(generate(args.n, seed=args.seed))
        audits = audit([r.article for r in resolved], unspent_facts, spent_facts, hosts)
        spent.extra.update(audit_lines(audits))
    if spent.wall is not None and unspent.bound > 0:
        spent.extra["wall / the unspent world's bound"] = (
            f"{spent.wall / unspent.bound:.2f}x (unspent run: {_fmt(unspent.wall)} s)"
        )
    return [spent, unspent]


def dask_lines(result: Mapping[str, Any]) -> dict[str, Any]:
    """The dask scenario's own figures: the cluster, each worker's peak RSS, the coordinator."""
    peaks = result.get("worker_peak_rss_mb") or []
    lines: dict[str, Any] = {
        "cluster": f"{result.get('workers', '?')} worker processes x 1 thread, "
        f"{result.get('partitions', '?')} partitions",
        "peak RSS per worker (MB)": ", ".join(f"{p:.0f}" for p in peaks) or "-",
        "client process peak RSS (MB)": _rounded(result.get("peak_rss_mb")),
    }
    left = result.get("coordinator_places_left")
    if left is not None:
        lines["coordinator places held at the end"] = left or "none"
        lines["coordinator leases reclaimed"] = result.get("coordinator_reclaimed", 0)
    return lines


def _rounded(value: Any) -> str:
    return f"{value:.0f}" if isinstance(value, int | float) else "-"


def run_dask_scenario(args: argparse.Namespace, cache_root: Path) -> list[ScenarioReport]:
    """``ddf.lit.run()`` on a LocalCluster of each ``--dask-workers`` size, cold, in turn."""
    reports = []
    for workers in args.dask_sizes:
        print(f"-- dask: {workers} worker(s) ...", flush=True)
        report = run_requests_scenario(args, "dask", cache_root, workers=workers)
        print(format_scenario(report), flush=True)
        reports.append(report)
    print(format_dask(reports), flush=True)
    return reports


def format_dask(reports: list[ScenarioReport]) -> str:
    """One line per cluster size: wall, bound, ratio, requests, 429s, peak RSS, binding host."""
    lines = [
        "== dask: one row per cluster size",
        f"   {'workers':<22}{'wall s':>8}{'bound s':>9}{'ratio':>7}{'requests':>10}{'429s':>6}"
        f"{'max worker MB':>15}  binds",
    ]
    for r in reports:
        peaks = [p for p in (r.extra.get("peak RSS per worker (MB)") or "").split(", ") if p]
        peak = max((float(p) for p in peaks if p != "-"), default=None)
        binds = r.terms[0].host if r.terms and r.bound > 0 else "-"
        lines.append(
            f"   {r.name:<22}{_fmt(r.wall):>8}{r.bound:>9.2f}{_fmt(r.ratio):>7}"
            f"{sum(r.requests.values()):>10}{sum(r.throttled.values()):>6}"
            f"{_rounded(peak):>15}  {binds}"
        )
    return "\n".join(lines)


def _fmt(value: float | None) -> str:
    return "-" if value is None else f"{value:.2f}"


def memory_lines(result: Mapping[str, Any]) -> dict[str, str]:
    """The memory scenario's figures: the run's peak RSS against the frame alone.

    The baseline is the client's RSS with pandas, the library and the input
    frame loaded and nothing run, measured in the same process just before;
    the ratio and the difference are what the run added, the ceiling is issue 14's.
    """
    peak, base = result.get("peak_rss_mb"), result.get("baseline_rss_mb")
    if not isinstance(peak, int | float) or not isinstance(base, int | float) or base <= 0:
        return {}
    verdict = "under" if peak < MEMORY_CEILING_MB else "OVER"
    return {
        "baseline RSS (frame alone)": f"{base:.0f} MB",
        "peak RSS / baseline": f"{peak / base:.2f} (the run added {peak - base:.0f} MB)",
        "ceiling": f"{verdict} {MEMORY_CEILING_MB:.0f} MB (peak {peak:.0f} MB)",
    }


def _compact_counts(counts: Mapping[str, int]) -> str:
    return ", ".join(f"{k} {v}" for k, v in sorted(counts.items(), key=lambda kv: -kv[1]))


def _converge(
    args: argparse.Namespace, world: DrawnWorld | None, share: float, cache_dir: Path
) -> tuple[dict[str, Any], World, FakeUpstream]:
    """Run ``run()`` and its re-runs once against a fresh fake failing ``share`` of requests."""
    corpus = generate(args.n, seed=args.seed)
    fake_world = World(corpus.articles, keys=WORLD_KEYS)
    fake = FakeUpstream().start()
    limits = world.limits() if world is not None else LIMITS
    plan = _fault_plan(args, share)
    fake_world.install(fake, latency=args.latency, limits=limits, faults=plan, **_extras(args))
    try:
        result = _child(
            args,
            "converge",
            args.n,
            fake.port,
            fake,
            cache=str(cache_dir),
            max_rounds=str(args.max_rounds),
        )
    finally:
        fake.stop()
    return result, fake_world, fake


def run_faults_scenario(args: argparse.Namespace, cache_root: Path) -> ScenarioReport:
    """``run()`` then re-runs until nothing is abandoned or partial, with and without faults."""
    world = draw_world(args.world_seed) if args.world_seed is not None else None
    share = args.faults or 0.2
    credentials = not args.no_credentials
    corpus = generate(args.n, seed=args.seed)
    print("-- faults: the fault-free run ...", flush=True)
    clean, _, clean_fake = _converge(args, world, 0.0, Path(tempfile.mkdtemp(dir=cache_root)))
    print(f"-- faults: the run with {share:.0%} faults ...", flush=True)
    faulted, fault_world, fake = _converge(
        args, world, share, Path(tempfile.mkdtemp(dir=cache_root))
    )
    ideal = dict(ideal_requests(corpus, PIPELINE_STEPS, credentials=credentials))
    bound, terms = lower_bound(
        ideal, latency=args.latency, concurrency=args.concurrency, **_bound_limits(world)
    )
    rounds = faulted.get("rounds", [])
    requests = dict(World.requests_per_host(fake))
    report = ScenarioReport(
        name="faults",
        n=args.n,
        latency=args.latency,
        concurrency=args.concurrency,
        credentials=credentials,
        wall=sum(float(r["wall"]) for r in rounds) if rounds else None,
        bound=bound,
        requests=requests,
        throttled=dict(fault_world.throttled),
        ideal=ideal,
        terms=terms,
        peak_rss_mb=faulted.get("peak_rss_mb"),
        outcomes=faulted.get("outcomes", {}),
        error=faulted.get("error") or clean.get("error"),
        rates=dict(_bound_limits(world).get("rates", {})),
        world=world.to_json() if world is not None else None,
    )
    clean_requests = sum(World.requests_per_host(clean_fake).values())
    comparison = compare(clean.get("digests", []), faulted.get("digests", []))
    fault_seed = args.seed if args.fault_seed is None else args.fault_seed
    converged = "converged" if faulted.get("converged") else "NOT converged"
    report.extra.update(
        {
            "fault share": f"{share:.0%} of every host's requests, seed {fault_seed}",
            "faults injected": _compact_counts(fault_world.fault_kinds),
            "rounds": f"{len(rounds)} ({converged} within {args.max_rounds})",
            "per round": round_lines(rounds),
            "fault-free run": round_lines(clean.get("rounds", [])),
            "requests spent": f"{sum(requests.values())} with faults, {clean_requests} without "
            f"({sum(requests.values()) / max(1, clean_requests):.2f}x)",
            "rows differing from the fault-free run": f"{comparison.rows_differing} of "
            f"{comparison.rows}",
            "columns differing (rows)": _compact_counts(comparison.columns) or "none",
        }
    )
    for column, (was, now) in list(comparison.example.items())[:6]:
        report.extra[f"e.g. {column}"] = f"fault-free {was!r} / faulted {now!r}"
    if args.faults_diff:
        rows = differing_rows(clean.get("digests", []), faulted.get("digests", []))
        Path(args.faults_diff).write_text(json.dumps(rows, indent=1), encoding="utf-8")
        report.extra["differing rows written to"] = args.faults_diff
    return report


def run_worlds(args: argparse.Namespace, cache_root: Path) -> list[ScenarioReport]:
    """Draw ``--worlds`` worlds and run each cold through ``run()`` and the chained calls."""
    seed = 1 if args.world_seed is None else args.world_seed
    reports: list[ScenarioReport] = []
    for world in draw_worlds(seed, max(1, args.worlds)):
        print(world.describe(), flush=True)
        for runner in WORLD_RUNNERS:
            bound, _ = world_bound(args, runner, world)
            limit = args.run_timeout or 60.0 + 10.0 * bound
            limit = min(limit, args.timeout)
            cache_dir = Path(tempfile.mkdtemp(prefix="litfetch-bench-world-", dir=cache_root))
            print(f"-- world {world.seed}: {runner} (timeout {limit:.0f} s) ...", flush=True)
            report = run_requests_scenario(args, runner, cache_dir, world=world, timeout=limit)
            print(format_scenario(report), flush=True)
            reports.append(report)
    print(format_worlds(reports), flush=True)
    return reports


def run_licence_scenario(args: argparse.Namespace) -> ScenarioReport:
    """Run the licence-extraction throughput scenario (no network)."""
    result = _child(args, "licence", args.licence_n, 0)
    wall = result.get("wall")
    parse_wall = result.get("parse_wall")
    report = ScenarioReport(
        name="licence",
        n=args.licence_n,
        latency=0.0,
        concurrency=1,
        credentials=False,
        wall=wall,
        # the floor for a parser-based extractor: parsing the same bytes once
        bound=float(parse_wall or 0.0),
        requests={},
        throttled={},
        ideal={},
        terms=[],
        peak_rss_mb=result.get("peak_rss_mb"),
        error=result.get("error"),
    )
    for key in (
        "bodies",
        "megabytes",
        "bodies_per_second",
        "licence_found",
        "stated_url_checked",
        "stated_url_agree",
    ):
        if key in result:
            value = result[key]
            report.extra[key] = round(value, 2) if isinstance(value, float) else value
    if "traceback" in result:
        report.extra["traceback"] = "\n" + result["traceback"]
    return report


def main(argv: list[str] | None = None) -> int:
    """Run the chosen scenarios, print their figures and write the JSON report."""
    args = _parse(argv)
    needs_accessor = any(s != "licence" for s in args.scenarios)
    problem = missing_surface(
        need_accessor=needs_accessor, need_licence="licence" in args.scenarios
    )
    if problem:
        print(
            f"benchmarks: cannot run yet: {problem}.\n"
            "The benchmark drives the public surface only: `import litfetch_df` must register "
            "df.lit (resolve, fetch_bodies, list_files, licences taking session=, progress=, "
            "concurrency=, credentials=, out_dir=) and "
            "litfetch_df.operations.licence.extract_source_metadata must exist.",
            file=sys.stderr,
        )
        return 2
    cache_dir = Path(tempfile.mkdtemp(prefix="litfetch-bench-cache-"))
    reports: list[ScenarioReport] = []
    started = time.perf_counter()
    try:
        for name in args.scenarios:
            print(f"-- running {name} ...", flush=True)
            if name == "worlds":
                reports.extend(run_worlds(args, cache_dir))
                continue
            if name == "faults":
                report = run_faults_scenario(args, cache_dir)
                reports.append(report)
                print(format_scenario(report), flush=True)
                continue
            if name == "dask":
                reports.extend(run_dask_scenario(args, cache_dir))
                continue
            world = draw_world(args.world_seed) if args.world_seed is not None else None
            if world is not None:
                print(world.describe(), flush=True)
            if name == "pipeline" and args.quota:
                for report in run_quota_pair(args, cache_dir, world):
                    reports.append(report)
                    print(format_scenario(report), flush=True)
                continue
            if name == "licence":
                report = run_licence_scenario(args)
            elif name == "warm":
                # A warm run is short and CPU-bound, so one run is at the mercy of a noisy
                # machine: run it several times (each a fresh process) and keep the median.
                runs = [
                    run_requests_scenario(args, name, cache_dir, world=world)
                    for _ in range(max(1, args.warm_runs))
                ]
                timed = sorted((r for r in runs if r.wall is not None), key=lambda r: r.wall or 0)
                report = timed[len(timed) // 2] if timed else runs[0]
                if len(timed) > 1:
                    walls = ", ".join(f"{r.wall:.2f}" for r in timed)
                    report.extra["warm runs (s), median shown"] = walls
            else:
                report = run_requests_scenario(args, name, cache_dir, world=world)
            if name == "warm":
                cold = next((r for r in reports if r.name == "pipeline"), None)
                if cold and cold.wall and report.wall is not None:
                    report.extra["warm / cold wall"] = f"{report.wall / cold.wall:.1%}"
            reports.append(report)
            print(format_scenario(report), flush=True)
    finally:
        shutil.rmtree(cache_dir, ignore_errors=True)
    meta = {
        "python": sys.version.split()[0],
        "platform": platform.platform(),
        "cpus": os.cpu_count(),
        "seed": args.seed,
        "total_seconds": time.perf_counter() - started,
        "limits": {
            h: {"per_second": lim.per_second, "burst": lim.burst} for h, lim in LIMITS.items()
        },
        "world_seed": args.world_seed,
        "worlds": world_rows([r for r in reports if r.world is not None]),
    }
    write_json(reports, Path(args.json), meta)
    print(f"-- wrote {args.json} ({meta['total_seconds']:.0f} s in all)")
    return 1 if any(r.error for r in reports) else 0


if __name__ == "__main__":
    sys.exit(main())
