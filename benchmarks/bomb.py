"""``python -m benchmarks.bomb`` (part of ``make bench``): what a compression bomb costs in memory.

A server on 127.0.0.1 answers one GET with ``Content-Encoding: gzip, gzip``:
a few KiB on the wire that inflate to ``--decoded`` bytes (default 1 GiB).
Each case runs in a fresh child process, so its peak resident set is its own:

- ``library``: :meth:`litfetch_df.Session.get` with ``max_body_bytes=--cap``
  (default 16 MiB). The body is decoded a bounded piece at a time and the
  request is given up once the cap is passed (issue 26, item 1);
- ``download``: :meth:`~litfetch_df.Session.download_to`, the streamed path;
- ``httpx`` (the "before"): plain ``httpx.AsyncClient.get``, which inflates
  the whole body before anyone can count it, as the library did until then.

Printed per case: the peak RSS above the process's own baseline (the bomb
already built), the tracemalloc peak of the request (library cases), and
whether the request was refused. Not a timed test: nothing here is judged by
the wall clock, and ``make test`` does not run it.
"""

from __future__ import annotations

import argparse
import asyncio
import gzip
import json
import resource
import subprocess
import sys
import tempfile
import tracemalloc
import zlib
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
if str(ROOT) not in sys.path:  # tests.raw_server lives beside the package
    sys.path.insert(0, str(ROOT))

MIB = 2**20
CASES = ("library", "download", "httpx")


def bomb(decoded: int) -> bytes:
    """``decoded`` zero bytes gzipped twice, built a MiB at a time."""
    inner = zlib.compressobj(9, zlib.DEFLATED, zlib.MAX_WBITS | 16)
    chunk = bytes(MIB)
    parts = [inner.compress(chunk) for _ in range(decoded // MIB)]
    parts.append(inner.flush())
    return gzip.compress(b"".join(parts), 9)


def _rss_mib() -> float:
    # ru_maxrss is in KiB on Linux: the process's peak so far.
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


async def _run_case(case: str, decoded: int, cap: int) -> dict[str, Any]:
    import httpx

    import litfetch_df
    from tests.raw_server import RawServer, http_answer

    body = bomb(decoded)
    answer = http_answer(body, headers={"Content-Encoding": "gzip, gzip"})
    baseline = _rss_mib()
    refused = ""
    traced = None
    async with RawServer(lambda _: answer) as server:
        url = f"http://127.0.0.1:{server.port}/bomb"
        if case == "httpx":
            async with httpx.AsyncClient() as client:
                got = await client.get(url)
                refused = f"no: {len(got.content) // MIB} MiB read"
        else:
            session = litfetch_df.Session(
                max_body_bytes=cap,
                allow_private_network=True,  # the bomb is served from 127.0.0.1
                retry=litfetch_df.RetryPolicy(max_attempts=1),
            )
            tracemalloc.start()
            try:
                async with session:
                    if case == "library":
                        await session.get(url)
                    else:
                        with tempfile.TemporaryDirectory() as tmp:
                            await session.download_to(url, Path(tmp) / "bomb.bin")
                refused = "no"
            except litfetch_df.UpstreamUnavailable as exc:
                refused = "yes: " + str(exc).split(": GET", 1)[0]
            finally:
                traced = tracemalloc.get_traced_memory()[1] / MIB
                tracemalloc.stop()
    return {
        "case": case,
        "wire_kib": round(len(body) / 1024, 1),
        "decoded_mib": decoded // MIB,
        "cap_mib": round(cap / MIB, 1),
        "rss_peak_over_baseline_mib": round(_rss_mib() - baseline, 1),
        "tracemalloc_peak_mib": None if traced is None else round(traced, 1),
        "refused": refused,
    }


def main(argv: list[str] | None = None) -> int:
    """Run every case in a child process and print what each cost."""
    parser = argparse.ArgumentParser(prog="python -m benchmarks.bomb", description=__doc__)
    parser.add_argument("--decoded", type=int, default=1024, help="MiB the bomb inflates to")
    parser.add_argument("--cap", type=float, default=16, help="max_body_bytes, in MiB")
    parser.add_argument("--case", choices=CASES, help=argparse.SUPPRESS)  # the child's side
    parser.add_argument("--cases", default=",".join(CASES), help="comma-separated cases to run")
    parser.add_argument("--result", type=Path, help="write the figures here as JSON")
    args = parser.parse_args(argv)
    decoded, cap = args.decoded * MIB, int(args.cap * MIB)
    if args.case:
        print(json.dumps(asyncio.run(_run_case(args.case, decoded, cap))))
        return 0
    rows = []
    for case in args.cases.split(","):
        command = [sys.executable, "-m", "benchmarks.bomb", "--case", case]
        command += ["--decoded", str(args.decoded), "--cap", str(args.cap)]
        done = subprocess.run(command, capture_output=True, text=True, cwd=ROOT, check=True)
        rows.append(json.loads(done.stdout.strip().splitlines()[-1]))
    print(f"gzip,gzip bomb: {rows[0]['wire_kib']} KiB on the wire, {args.decoded} MiB decoded")
    print(f"{'case':10} {'cap MiB':>8} {'RSS peak +MiB':>14} {'tracemalloc MiB':>16}  refused")
    for row in rows:
        traced = "-" if row["tracemalloc_peak_mib"] is None else row["tracemalloc_peak_mib"]
        print(
            f"{row['case']:10} {row['cap_mib']:>8} {row['rss_peak_over_baseline_mib']:>14} "
            f"{traced:>16}  {row['refused']}"
        )
    if args.result is not None:
        args.result.write_text(json.dumps(rows, indent=2) + "\n", encoding="utf-8")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
