"""``python -m benchmarks.text`` (part of ``make bench``): how fast bodies become text, and memory.

The corpus is the text fixtures (``--fixtures``; default the shared fixture folder,
else the recorded JATS of ``tests/data/jats``) replicated to ``--n`` bodies (default
1,200), each copy a distinct byte string (a trailing comment names its copy) under
its own PMCID. Measured, single core, in this one process:

- **bare**: a hardened ``lxml`` parse of each body plus ``"".join(root.itertext())``,
  the least any extraction does;
- **read_text**: :func:`litfetch_df.read_text` of the same bytes (parse, sections,
  paragraphs, captions, references, citations, losses).

Each is run ``--repeat`` times, the two alternating pass by pass (the machine may be
shared); the best run gives documents/s and MB/s, and the ratio of the two throughputs
is the figure the issue sets a floor for (0.5).

Then the peak memory of ``df.lit.text(out_dir=...)`` over frames of ``--rows`` rows
(default 1,000 and 4,000) whose bodies are files on disk (``body_path``), each size
in a child process of its own: the peak of the call (tracemalloc's plus the Arrow
pool's, which holds the string columns), the deep size of the frame it returns, and
the peak *beyond* that frame (what the call itself holds, which should not grow with
the rows). Not a timed test: ``make test`` never runs it.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
import time
import tracemalloc
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path
from typing import Any, cast

ROOT = Path(__file__).resolve().parent.parent
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

SHARED = Path("/work/shared/fixtures/text")
RECORDED = ROOT / "tests" / "data" / "jats"
MB = 1_000_000


def fixture_bodies(folder: Path | None) -> list[bytes]:
    """The XML bodies to replicate: ``folder``'s ``.nxml`` and ``.elsevier.xml`` files."""
    where = folder or (SHARED if SHARED.is_dir() else RECORDED)
    paths = sorted([*where.glob("*.nxml"), *where.glob("*.elsevier.xml")])
    if not paths:
        raise SystemExit(f"no .nxml or .elsevier.xml fixtures in {where}")
    return [p.read_bytes() for p in paths]


def corpus(bodies: Sequence[bytes], n: int) -> list[bytes]:
    """``n`` distinct bodies: the fixtures in turn, each copy marked after its root element."""
    return [bodies[i % len(bodies)] + f"\n<!-- copy {i} -->\n".encode() for i in range(n)]


def bare(body: bytes) -> int:
    """A hardened lxml parse plus every text node joined: the floor of any extraction.

    The parser has the settings :func:`litfetch_df.safexml.parse.parse_xml` uses (comments
    dropped as there), and the text nodes are joined in C with no filter in Python:
    parsed XML gives ``str`` only, and a filter would slow the baseline and flatter
    the ratio.
    """
    from lxml import etree

    from litfetch_df.safexml.parse import _parser

    root = etree.fromstring(body, _parser())
    return len("".join(cast("Iterator[str]", root.itertext())))


def ours(body: bytes) -> int:
    """:func:`litfetch_df.read_text` of the body."""
    from litfetch_df import read_text

    doc = read_text(body)
    if doc.text_error:
        raise RuntimeError(doc.text_error)
    return len(doc.body_text)


def best_times(
    works: Sequence[Callable[[bytes], int]], bodies: Sequence[bytes], repeat: int
) -> list[float]:
    """The best wall time, in seconds, of ``repeat`` passes of each of ``works`` over ``bodies``.

    The passes alternate (one of each, ``repeat`` times), so that a change in the load of
    a shared machine between one method's passes and the other's does not skew the ratio.
    """
    best = [float("inf")] * len(works)
    for _ in range(repeat):
        for i, work in enumerate(works):
            start = time.perf_counter()
            for body in bodies:
                work(body)
            best[i] = min(best[i], time.perf_counter() - start)
    return best


def throughput(n: int, repeat: int, fixtures: Path | None) -> dict[str, Any]:
    """Documents/s and MB/s of the bare parse and of ``read_text``, and their ratio."""
    bodies = corpus(fixture_bodies(fixtures), n)
    size = sum(len(b) for b in bodies)
    for body in bodies[:20]:  # warm both paths (imports, lxml's dictionaries)
        bare(body)
        ours(body)
    out: dict[str, Any] = {"documents": n, "megabytes": round(size / MB, 1)}
    names = ("bare_lxml_itertext", "read_text")
    for name, seconds in zip(names, best_times((bare, ours), bodies, repeat), strict=True):
        out[name] = {
            "seconds": round(seconds, 3),
            "docs_per_s": round(n / seconds, 1),
            "mb_per_s": round(size / MB / seconds, 2),
        }
    out["ratio"] = round(
        out["read_text"]["docs_per_s"] / out["bare_lxml_itertext"]["docs_per_s"], 3
    )
    return out


def memory_child(rows: int, fixtures: Path | None) -> dict[str, Any]:
    """In this (child) process: ``df.lit.text(out_dir=...)`` over ``rows`` bodies on disk."""
    import pandas as pd
    import pyarrow as pa

    import litfetch_df  # noqa: F401  (registers .lit)

    with tempfile.TemporaryDirectory(prefix="litfetch-bench-text-") as tmp:
        folder = Path(tmp)
        paths = []
        for i, body in enumerate(corpus(fixture_bodies(fixtures), rows)):
            path = folder / f"PMC{9_000_000 + i}.xml"
            path.write_bytes(body)
            paths.append(str(path))
        frame = pd.DataFrame(
            {
                "pmcid": pd.array([f"PMC{9_000_000 + i}" for i in range(rows)], "string"),
                "body_path": pd.array(paths, "string"),
            }
        )
        out_dir = folder / "text"
        # Arrow's buffers (the string columns) are not Python allocations, so tracemalloc
        # does not see them: the Arrow pool's own peak is added (an upper bound of the
        # sum, as the two peaks need not coincide).
        pool = pa.default_memory_pool()
        arrow_before = pool.bytes_allocated()
        tracemalloc.start()
        before = tracemalloc.get_traced_memory()[0]
        result = frame.lit.text(out_dir=out_dir)
        python_peak = tracemalloc.get_traced_memory()[1] - before
        tracemalloc.stop()
        arrow_peak = max(pool.max_memory() - arrow_before, 0)
        peak = python_peak + arrow_peak
        held = int(result.memory_usage(deep=True).sum()) - int(frame.memory_usage(deep=True).sum())
        assert result["text_error"].isna().all() and len(list(out_dir.iterdir())) == rows
    return {
        "rows": rows,
        "peak_mb": round(peak / MB, 2),
        "python_peak_mb": round(python_peak / MB, 2),
        "arrow_peak_mb": round(arrow_peak / MB, 2),
        "result_columns_mb": round(held / MB, 2),
        "peak_beyond_result_mb": round((peak - held) / MB, 2),
    }


def memory(rows: Sequence[int], fixtures: Path | None) -> list[dict[str, Any]]:
    """:func:`memory_child` at each size, each in a fresh process (its peak is its own)."""
    found = []
    for n in rows:
        argv = [sys.executable, "-m", "benchmarks.text", "--memory-child", str(n)]
        if fixtures is not None:
            argv += ["--fixtures", str(fixtures)]
        done = subprocess.run(argv, cwd=ROOT, capture_output=True, text=True, check=True)
        found.append(json.loads(done.stdout.strip().splitlines()[-1]))
    return found


def main(argv: Sequence[str] | None = None) -> int:
    """Run the text benchmark; print a table and write ``benchmarks/results/text.json``."""
    parser = argparse.ArgumentParser(prog="python -m benchmarks.text", description=__doc__)
    parser.add_argument("--n", type=int, default=1200, help="bodies in the corpus (>= 1000)")
    parser.add_argument("--repeat", type=int, default=3, help="passes per method; best counts")
    parser.add_argument("--rows", default="1000,4000", help="frame sizes for the memory runs")
    parser.add_argument("--fixtures", type=Path, help="folder of .nxml / .elsevier.xml files")
    parser.add_argument("--memory-child", type=int, help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.memory_child is not None:
        print(json.dumps(memory_child(args.memory_child, args.fixtures)))
        return 0
    speed = throughput(args.n, args.repeat, args.fixtures)
    mem = memory([int(r) for r in args.rows.split(",")], args.fixtures)
    print(f"text extraction, {speed['documents']} bodies, {speed['megabytes']} MB, single core")
    for name in ("bare_lxml_itertext", "read_text"):
        r = speed[name]
        print(f"  {name:<20} {r['docs_per_s']:>8.1f} docs/s {r['mb_per_s']:>8.2f} MB/s")
    print(f"  ratio read_text / bare: {speed['ratio']:.2f} (target >= 0.5)")
    print("df.lit.text(out_dir=...) peak memory (tracemalloc)")
    for m in mem:
        print(
            f"  {m['rows']:>6} rows: peak {m['peak_mb']:>7.2f} MB (Python "
            f"{m['python_peak_mb']:.2f}, Arrow {m['arrow_peak_mb']:.2f}), of which the result's "
            f"columns {m['result_columns_mb']:>7.2f} MB; "
            f"beyond them {m['peak_beyond_result_mb']:.2f} MB"
        )
    results = ROOT / "benchmarks" / "results"
    results.mkdir(exist_ok=True)
    (results / "text.json").write_text(json.dumps({"speed": speed, "memory": mem}, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
