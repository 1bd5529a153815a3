"""The client side of one benchmark scenario, run in its own process.

The parent process (``python -m benchmarks``) serves the fake world; this
process regenerates the same corpus from ``--n`` / ``--seed``, runs the
scenario's steps through the public pandas surface (``df.lit``), marks each
step's start and end on the fake's control host so the parent can attribute
requests to steps, and writes wall times, outcome counts and its own peak RSS
as JSON. Running the client apart keeps the server's threads off its CPU and
out of its memory figure.
"""

from __future__ import annotations

import argparse
import collections
import hashlib
import importlib
import json
import logging
import os
import re
import resource
import sys
import tempfile
import time
import traceback
import urllib.parse
from collections.abc import Callable
from pathlib import Path
from typing import Any

import httpx

from tests.fake_upstream import loopback_transport

__all__ = [
    "CONTACT",
    "CREDENTIALS",
    "PIPELINE_STEPS",
    "SCENARIO_STEPS",
    "ledger_quotas",
    "light",
    "loopback_client",
    "main",
    "missing_surface",
    "model_steps",
    "row_digests",
    "rss_mb",
    "run_dask",
    "unfinished",
]

CONTACT = "bench@litfetch-bench.org"
CREDENTIALS = {
    "elsevier_api_key": "bench-elsevier-key",
    "springer_api_key": "bench-springer-oa-key",
    "springer_meta_api_key": "bench-springer-meta-key",
}
WORLD_KEYS = {
    "elsevier": CREDENTIALS["elsevier_api_key"],
    "springer_openaccess": CREDENTIALS["springer_api_key"],
    "springer_meta": CREDENTIALS["springer_meta_api_key"],
}

PIPELINE_STEPS: tuple[str, ...] = ("resolve", "bodies", "files", "licences")
"""The steps of the full pipeline (``benchmarks.model`` step names)."""

SCENARIO_STEPS: dict[str, tuple[str, ...]] = {
    "resolve": ("resolve",),
    "bodies": ("resolve", "bodies"),
    "pipeline": ("run",),
    "warm": ("run",),
    "warm-subset": ("run",),
    "warm-extended": ("run",),
    "chained": PIPELINE_STEPS,
    "memory": ("run",),
    "dask": ("run",),
}
"""The phases each scenario's client runs and marks, in order.

``run`` is one ``df.lit.run()`` call doing every step of :data:`PIPELINE_STEPS`
in one pass; the other phases are one chained ``.lit`` method each.
"""

_METHODS = {
    "resolve": "resolve",
    "bodies": "fetch_bodies",
    "files": "list_files",
    "licences": "licences",
    "run": "run",
}


def model_steps(phase: str) -> tuple[str, ...]:
    """Return the ``benchmarks.model`` steps a client phase does (``run``: the whole pipeline)."""
    return PIPELINE_STEPS if phase == "run" else (phase,)


def missing_surface(need_accessor: bool = True, need_licence: bool = False) -> str | None:
    """Return why the library surface the benchmark drives is unavailable, or ``None``."""
    try:
        import pandas as pd

        import litfetch_df
    except ImportError as exc:  # pragma: no cover - the package is installed by make
        return f"cannot import litfetch_df / pandas: {exc}"
    if not hasattr(litfetch_df, "Session"):
        return "litfetch_df.Session is missing"
    if need_accessor:
        if not hasattr(pd.DataFrame, "lit"):
            return (
                "`import litfetch_df` did not register the pandas `.lit` accessor "
                "(litfetch_df.frame); the benchmark drives df.lit.resolve / fetch_bodies / "
                "list_files / licences"
            )
        lit = pd.DataFrame({"doi": []}).lit
        absent = [m for m in _METHODS.values() if not callable(getattr(lit, m, None))]
        if absent:
            return f"df.lit lacks {', '.join(absent)}"
    if need_licence:
        try:
            module = importlib.import_module("litfetch_df.operations.licence")
        except ImportError as exc:
            return f"litfetch_df.operations.licence is missing: {exc}"
        if not callable(getattr(module, "extract_source_metadata", None)):
            return "litfetch_df.operations.licence.extract_source_metadata is missing"
    return None


def _factory(port: int) -> Callable[[], httpx.AsyncClient]:
    def make() -> httpx.AsyncClient:
        return httpx.AsyncClient(
            transport=loopback_transport(port),
            timeout=30.0,
            limits=httpx.Limits(max_connections=200, max_keepalive_connections=100),
        )

    return make


def loopback_client(port: int) -> httpx.AsyncClient:
    """An httpx client to the fake on ``port`` (module level: Dask workers unpickle it)."""
    return _factory(port)()


def _mark(port: int, name: str) -> None:
    quoted = urllib.parse.quote(name, safe="")
    httpx.get(f"http://127.0.0.1:{port}/mark/{quoted}", headers={"Host": "bench.control"})


def rss_mb() -> float:
    """This process's peak resident memory so far, in MB."""
    # ru_maxrss is in kilobytes on Linux (bytes on macOS)
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    return peak / (1024 * 1024) if sys.platform == "darwin" else peak / 1024


def _count(frame: Any, column: str) -> int | None:
    if column not in frame.columns:
        return None
    return int(frame[column].notna().sum())


def _outcomes(frame: Any) -> dict[str, Any]:
    out: dict[str, Any] = {"rows": len(frame)}
    for column in (
        "pmid",
        "pmcid",
        "doi",
        "body_source",
        "body_path",
        "n_files",
        "licence",
        "access",
    ):
        count = _count(frame, column)
        if count is not None:
            out[f"non_null:{column}"] = count
    for column in [c for c in frame.columns if str(c).endswith("_error")]:
        out[f"errors:{column}"] = int(frame[column].notna().sum())
    if "body_source" in frame.columns:
        counts = frame["body_source"].value_counts(dropna=True)
        out["body_sources"] = {str(k): int(v) for k, v in counts.items()}
    if "n_files" in frame.columns:
        out["files_total"] = int(frame["n_files"].fillna(0).sum())
    if "licence_basis" in frame.columns:
        counts = frame["licence_basis"].value_counts(dropna=True)
        out["licence_basis"] = {str(k): int(v) for k, v in counts.items()}
    abandoned = _abandoned(frame)
    if abandoned:
        out["abandoned"] = abandoned
    return out


def row_facts(frame: Any) -> dict[str, list[str | None]]:
    """The fact and error columns of :mod:`benchmarks.quota_audit`, one cell per row."""
    from benchmarks.quota_audit import ERROR_COLUMN, FACT_COLUMNS

    out: dict[str, list[str | None]] = {}
    for column in dict.fromkeys([*FACT_COLUMNS, *ERROR_COLUMN.values()]):
        if column in frame.columns:
            out[column] = [None if _is_na(v) else str(v) for v in frame[column]]
    return out


def _is_na(value: Any) -> bool:
    import pandas as pd

    return value is None or (not isinstance(value, list | tuple) and bool(pd.isna(value)))


def _abandoned(frame: Any) -> dict[str, int]:
    """Count rows whose error columns say ``abandoned``, per column and reason (digits as #)."""
    counts: collections.Counter[str] = collections.Counter()
    for column in [c for c in frame.columns if str(c).endswith("_error")]:
        for value in frame[column].dropna():
            reasons = {
                re.sub(r"\d+(?:\.\d+)?", "#", part.strip())[:90]
                for part in str(value).split(";")
                if part.strip().startswith("abandoned")
            }
            for reason in reasons:
                counts[f"{column}: {reason}"] += 1
    return dict(counts.most_common())


_QUOTA_ROWS: dict[str, tuple[str, str]] = {
    "unpaywall": ("api.unpaywall.org", "single"),
    "elsevier": ("api.elsevier.com", "fulltext"),
    "openalex-keyed-list": ("api.openalex.org", "list"),
    "openalex-keyless-list": ("api.openalex.org", "list"),
}
"""The ledger row (host, kind) of each ``--quota`` name the fake knows (Springer's day is
shared by its kinds, which the ledger does not model, so it is left out)."""


def ledger_quotas(text: str) -> dict[tuple[str, str], int]:
    """``--quota`` (``unpaywall=50,...``) as the session's quota overrides."""
    out: dict[tuple[str, str], int] = {}
    for part in text.split(","):
        name, _, value = part.partition("=")
        row = _QUOTA_ROWS.get(name.strip().lower())
        if row is not None and value.strip():
            out[row] = int(value)
    return out


def run_steps(args: argparse.Namespace) -> dict[str, Any]:
    """Run the scenario's steps over the corpus frame; return per-step walls and outcomes."""
    import pandas as pd

    import litfetch_df
    from benchmarks.corpus import generate

    frame = generate(args.n, seed=args.seed).frame
    # What the process holds before any step: the interpreter, pandas, the library and the
    # input frame. The memory scenario's figure is the run's peak against this.
    baseline_mb = rss_mb()
    session = litfetch_df.Session(
        client_factory=_factory(args.port),
        contact=CONTACT,
        cache=args.cache or None,
        allow_private_network=True,  # the fake upstream listens on 127.0.0.1
        # a user who knows their plan's quotas (the fake's scaled ones) tells the session
        quotas=ledger_quotas(args.quota),
    )
    common: dict[str, Any] = {
        "session": session,
        "progress": False,
        "concurrency": args.concurrency,
    }
    if args.credentials:
        common["credentials"] = dict(CREDENTIALS)
    if args.scenario == "warm-subset":
        # Half the rows, reversed: other batches than the cold run's, the same ids.
        frame = frame.iloc[::-2]
    if args.scenario == "warm-extended":
        # A cold run on the first three quarters (unmarked: not counted), then the whole
        # frame: only the last quarter's ids are new.
        frame.head(len(frame) * 3 // 4).lit.run(steps=PIPELINE_STEPS, **common)
    # What the plan says will run out before anything is sent (issue 24: plan() predicts
    # which hosts' quotas a run spends): a kind whose planned requests pass what is left.
    plan = frame.lit.plan(session=session, credentials=common.get("credentials"))
    runs_out = sorted(
        f"{r['host']} {r['kind']}"
        for r in plan.to_dict("records")
        if r["quota_share"] is not None and not pd.isna(r["quota_share"]) and r["quota_share"] > 1
    )
    phases = []
    started = time.perf_counter()
    for step in SCENARIO_STEPS[args.scenario]:
        method = getattr(frame.lit, _METHODS[step])
        kwargs = dict(common)
        if step in ("bodies", "run") and args.out_dir:
            kwargs["out_dir"] = args.out_dir
        if step == "run":
            kwargs["steps"] = PIPELINE_STEPS
        _mark(args.port, f"start:{step}")
        t0 = time.perf_counter()
        frame = method(**kwargs)
        wall = time.perf_counter() - t0
        _mark(args.port, f"end:{step}")
        phases.append({"step": step, "wall": wall, "outcomes": _outcomes(frame)})
    # run()'s own record of its plan beside what it sent (attrs, issue 24 part 3)
    record = frame.attrs.get("litfetch_df_requests")
    extra: dict[str, Any] = {"row_facts": row_facts(frame)} if args.row_facts else {}
    return {
        **extra,
        "requests_record": record if isinstance(record, dict) else None,
        "plan_runs_out": runs_out,
        "phases": phases,
        "wall": time.perf_counter() - started,
        "outcomes": _outcomes(frame),
        "session_requests": getattr(session, "requests_by_host", {}),
        "baseline_rss_mb": baseline_mb,
    }


_HEAVY = ("body", "files", "related")
"""Result columns the Dask scenario leaves on the workers (their counts travel, not they)."""


def light(frame: Any) -> Any:
    """``frame`` without the heavy result columns."""
    return frame.drop(columns=[c for c in _HEAVY if c in frame.columns])


def run_dask(args: argparse.Namespace) -> dict[str, Any]:
    """``ddf.lit.run()`` on a LocalCluster of ``--workers`` processes; walls, outcomes, memory.

    The cluster starts before the clock does; the run is one ``compute()`` of the
    whole pipeline over ``2 x workers`` partitions, each in its own session, the
    rate-limited hosts paced by the cluster's coordinator. Only the light columns
    come back to this process; each worker's peak RSS is read in the worker.
    """
    import functools

    import dask.dataframe as dd
    from distributed import Client, LocalCluster

    import litfetch_df
    import litfetch_df.dask
    from benchmarks import client as here  # by module name, not __main__: workers import it
    from benchmarks.corpus import generate

    frame = generate(args.n, seed=args.seed).frame
    baseline_mb = rss_mb()
    factory = functools.partial(
        litfetch_df.Session,
        client_factory=functools.partial(here.loopback_client, args.port),
        cache=args.cache or None,
        allow_private_network=True,  # the fake upstream listens on 127.0.0.1
    )
    kwargs: dict[str, Any] = {
        "session_factory": factory,
        "contact": CONTACT,
        "progress": False,
        "concurrency": args.concurrency,
    }
    if args.credentials:
        kwargs["credentials"] = dict(CREDENTIALS)
    partitions = args.partitions or 2 * args.workers
    with (
        tempfile.TemporaryDirectory(prefix="litfetch-bench-dask-") as scratch,
        LocalCluster(
            n_workers=args.workers,
            threads_per_worker=1,
            processes=True,
            dashboard_address=":0",
            local_directory=scratch,
        ) as cluster,
        Client(cluster) as client,
    ):
        ddf = dd.from_pandas(frame, npartitions=partitions, sort=False)
        lazy = ddf.lit.run(PIPELINE_STEPS, **kwargs).map_partitions(here.light)
        coordinator = litfetch_df.dask.cluster_limiter(client)
        _mark(args.port, "start:run")
        t0 = time.perf_counter()
        done = lazy.compute()
        wall = time.perf_counter() - t0
        _mark(args.port, "end:run")
        worker_rss = client.run(here.rss_mb)
        held = coordinator.held().result()
        reclaimed = coordinator.reclaimed().result()
    outcomes = _outcomes(done)
    return {
        "phases": [{"step": "run", "wall": wall, "outcomes": outcomes}],
        "wall": wall,
        "outcomes": outcomes,
        "baseline_rss_mb": baseline_mb,
        "workers": args.workers,
        "partitions": partitions,
        "worker_peak_rss_mb": sorted(float(v) for v in worker_rss.values()),
        "coordinator_places_left": held,
        "coordinator_reclaimed": reclaimed,
    }


def unfinished(frame: Any) -> dict[str, int]:
    """Count rows whose error columns say ``abandoned`` or ``partial``, per column."""
    counts: dict[str, int] = {}
    for column in [c for c in frame.columns if str(c).endswith("_error")]:
        hit = 0
        for value in frame[column].dropna():
            parts = [part.strip() for part in str(value).split(";")]
            hit += any(p.startswith(("abandoned", "partial")) for p in parts)
        if hit:
            counts[str(column)] = hit
    return counts


def _cell(value: Any) -> str:
    """A short, comparable form of one frame cell (bytes by hash, lists element-wise)."""
    content = getattr(value, "content", None)
    if isinstance(content, bytes | bytearray):
        return "sha256:" + hashlib.sha256(content).hexdigest()[:16]
    if isinstance(value, bytes | bytearray):
        return "sha256:" + hashlib.sha256(value).hexdigest()[:16]
    if isinstance(value, list | tuple):
        return "[" + ", ".join(_cell(v) for v in value) + "]"
    if value is None or (isinstance(value, float) and value != value):
        return "NA"
    text = repr(value)
    return "NA" if text in ("<NA>", "NaT", "nan") else text


def row_digests(frame: Any) -> list[dict[str, str]]:
    """Each row of ``frame`` as ``{column: short form}`` (see :func:`_cell`)."""
    columns = [str(c) for c in frame.columns]
    return [
        {c: _cell(v) for c, v in zip(columns, row, strict=True)}
        for row in frame.itertuples(index=False, name=None)
    ]


def run_converge(args: argparse.Namespace) -> dict[str, Any]:
    """``df.lit.run()``, then re-runs until no error column says abandoned or partial."""
    import litfetch_df
    from benchmarks.corpus import generate

    frame = generate(args.n, seed=args.seed).frame
    session = litfetch_df.Session(
        client_factory=_factory(args.port),
        contact=CONTACT,
        cache=args.cache or None,
        allow_private_network=True,  # the fake upstream listens on 127.0.0.1
    )
    kwargs: dict[str, Any] = {
        "session": session,
        "progress": False,
        "concurrency": args.concurrency,
        "steps": PIPELINE_STEPS,
    }
    if args.credentials:
        kwargs["credentials"] = dict(CREDENTIALS)
    rounds = []
    for number in range(1, max(1, args.max_rounds) + 1):
        _mark(args.port, f"start:round{number}")
        t0 = time.perf_counter()
        frame = frame.lit.run(**kwargs)
        wall = time.perf_counter() - t0
        _mark(args.port, f"end:round{number}")
        left = unfinished(frame)
        rounds.append({"round": number, "wall": wall, "unfinished": left})
        if not left:
            break
    return {
        "rounds": rounds,
        "converged": not rounds[-1]["unfinished"],
        "outcomes": _outcomes(frame),
        "digests": row_digests(frame),
    }


def run_licence(args: argparse.Namespace) -> dict[str, Any]:
    """Time ``extract_source_metadata`` over many bodies, against a bare parse of the same bytes."""
    from litfetch_df import ELSEVIER_XML, JATS_XML, Blob, File, FileKind
    from litfetch_df.safexml.parse import parse_xml
    from tests.fakes.world import BodyHome, LicenceStyle, World

    from .corpus import generate

    extract = importlib.import_module("litfetch_df.operations.licence").extract_source_metadata
    corpus = generate(args.n, seed=args.seed)
    world = World(corpus.articles)
    blobs = []
    expected: list[str | None] = []
    for a in corpus.articles:
        if a.body is BodyHome.PMC_OA:
            data, media = world.jats(a, version=a.pmc_versions), JATS_XML
        elif a.body is BodyHome.EUROPE_PMC:
            data, media = world.jats(a, doctype=False), JATS_XML
        elif a.body is BodyHome.BOOKSHELF:
            data, media = world.bits(a), JATS_XML
        elif a.body is BodyHome.ELSEVIER:
            data, media = world.elsevier_xml(a), ELSEVIER_XML
        else:
            continue
        blobs.append(Blob(File(kind=FileKind.BODY, source="bench", media_type=media), data))
        xlink = a.licence_style is LicenceStyle.XLINK and a.body is not BodyHome.ELSEVIER
        expected.append(a.licence if xlink or a.body is BodyHome.ELSEVIER else None)
    size = sum(len(b.content) for b in blobs)
    t0 = time.perf_counter()
    for b in blobs:
        parse_xml(b.content)
    parse_wall = time.perf_counter() - t0
    t0 = time.perf_counter()
    results = [extract(b) for b in blobs]
    wall = time.perf_counter() - t0
    checked = [(e, r) for e, r in zip(expected, results, strict=True) if e is not None]
    agree = sum(1 for e, r in checked if getattr(r, "licence", None) == e)
    found = sum(1 for r in results if getattr(r, "licence", None) is not None)
    return {
        "bodies": len(blobs),
        "megabytes": size / 1e6,
        "wall": wall,
        "parse_wall": parse_wall,
        "bodies_per_second": len(blobs) / wall if wall else None,
        "licence_found": found,
        "stated_url_checked": len(checked),
        "stated_url_agree": agree,
    }


def _trace_sends(path: str) -> None:
    """With ``LITFETCH_BENCH_TRACE=FILE``, append each request's send (seconds since start, method,
    URL as the session logs it) to FILE: where a run's time goes, request by request."""
    if not path:
        return
    start = time.monotonic()

    class Stamp(logging.Formatter):
        def format(self, record: logging.LogRecord) -> str:
            return f"{time.monotonic() - start:8.3f} {record.getMessage()}"

    handler = logging.FileHandler(path, mode="w", encoding="utf-8")
    handler.setFormatter(Stamp())
    logger = logging.getLogger("litfetch_df.session")
    logger.addHandler(handler)
    logger.setLevel(logging.DEBUG)


def main(argv: list[str] | None = None) -> int:
    """Run one scenario's client side and write its JSON result to ``--result``."""
    parser = argparse.ArgumentParser(prog="python -m benchmarks.client")
    parser.add_argument("--port", type=int, default=0)
    parser.add_argument("--scenario", required=True)
    parser.add_argument("--n", type=int, required=True)
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--concurrency", type=int, default=32)
    parser.add_argument("--cache", default="")
    parser.add_argument("--out-dir", default="")
    parser.add_argument("--credentials", action="store_true")
    parser.add_argument("--max-rounds", type=int, default=6)
    parser.add_argument("--workers", type=int, default=1, help="dask: LocalCluster processes")
    parser.add_argument("--partitions", type=int, default=0, help="dask: 0 = 2 per worker")
    parser.add_argument("--quota", default="", help="the fake's scaled-down quotas")
    parser.add_argument("--row-facts", default="", help="non-empty: return the fact columns")
    parser.add_argument("--result", required=True)
    args = parser.parse_args(argv)
    _trace_sends(os.environ.get("LITFETCH_BENCH_TRACE", ""))
    result: dict[str, Any] = {"scenario": args.scenario}
    try:
        if args.scenario == "licence":
            result.update(run_licence(args))
        elif args.scenario == "converge":
            result.update(run_converge(args))
        elif args.scenario == "dask":
            result.update(run_dask(args))
        else:
            if args.scenario == "memory" and not args.out_dir:
                args.out_dir = tempfile.mkdtemp(prefix="litfetch-bench-out-")
            result.update(run_steps(args))
            if args.out_dir:
                files = [p for p in Path(args.out_dir).rglob("*") if p.is_file()]
                result["out_dir_files"] = len(files)
    except Exception as exc:
        result["error"] = f"{type(exc).__name__}: {exc}"
        result["traceback"] = traceback.format_exc(limit=8)
    result["peak_rss_mb"] = rss_mb()
    Path(args.result).write_text(json.dumps(result, indent=1, default=str), encoding="utf-8")
    return 0 if "error" not in result else 1


if __name__ == "__main__":
    sys.exit(main())
