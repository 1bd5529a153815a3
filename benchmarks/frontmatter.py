"""Front-matter reading against a full parse: ``python -m benchmarks.frontmatter``.

Licence and access terms sit in a body's front matter, so
:func:`litfetch_df.operations.licence.extract_source_metadata` parses only that
far (:func:`litfetch_df.safexml.frontmatter.read_front_matter`). This measures, in one
run and on the same bytes, two corpora: the synthetic corpus's bodies (JATS,
BITS, Elsevier; small, a few kB each) and the real PMC articles kept in
``tests/data/jats`` (40 to 106 kB each), each repeated to ``--real`` bodies:

- ``full parse``: a bare hardened lxml parse of the whole body (``parse_xml``);
- ``front read``: the front-matter reader alone;
- ``extract (front)``: ``extract_source_metadata`` as shipped;
- ``extract (whole)``: the same terms read from a whole parse, as before.

Each figure is the best of ``--repeat`` passes; the ratios are to the full
parse measured in the same run, so they do not depend on the machine. The
run also checks that the front-matter answer equals the whole-parse answer
for every body.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from collections.abc import Callable, Sequence
from typing import Any

from litfetch_df import ELSEVIER_XML, JATS_XML, Blob, File, FileKind
from litfetch_df.operations import licence as licence_module
from litfetch_df.operations.licence_evidence import LicenceEvidence
from litfetch_df.safexml.frontmatter import read_front_matter
from litfetch_df.safexml.parse import parse_xml

__all__ = ["main", "measure"]


def _bodies(n: int, seed: int) -> list[Blob]:
    from tests.fakes.world import BodyHome, World

    from .corpus import generate

    corpus = generate(n, seed=seed)
    world = World(corpus.articles)
    blobs: list[Blob] = []
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
    return blobs


def _real_bodies(count: int) -> list[Blob]:
    from pathlib import Path

    folder = Path(__file__).resolve().parent.parent / "tests" / "data" / "jats"
    files = sorted(folder.glob("*.*xml"))
    blobs = [
        Blob(File(kind=FileKind.BODY, source="bench", media_type=JATS_XML), path.read_bytes())
        for path in files
    ]
    return [blobs[i % len(blobs)] for i in range(count)] if blobs else []


def _whole_parse_evidence(blob: Blob) -> LicenceEvidence:
    """The terms read from a whole parse, as extraction worked before the front-matter reader."""
    root = parse_xml(blob.content)
    if blob.file.media_type == ELSEVIER_XML:
        return licence_module._elsevier_evidence(root)
    return licence_module._jats_evidence(root)


def _best(passes: int, work: Callable[[], object]) -> float:
    walls = []
    for _ in range(passes):
        t0 = time.perf_counter()
        work()
        walls.append(time.perf_counter() - t0)
    return min(walls)


def measure(blobs: Sequence[Blob], repeat: int = 3) -> dict[str, Any]:
    """Return the four walls (seconds), bodies per second and ratios to the full parse."""
    contents = [b.content for b in blobs]
    extract = licence_module.extract_source_metadata
    walls = {
        "full parse": _best(repeat, lambda: [parse_xml(c) for c in contents]),
        "front read": _best(repeat, lambda: [read_front_matter(c) for c in contents]),
        "extract (front)": _best(repeat, lambda: [extract(b) for b in blobs]),
        "extract (whole)": _best(repeat, lambda: [_whole_parse_evidence(b) for b in blobs]),
    }
    differ = sum(1 for b in blobs if licence_module.licence_evidence(b) != _whole_parse_evidence(b))
    full = walls["full parse"]
    return {
        "bodies": len(blobs),
        "mean_kilobytes": sum(map(len, contents)) / len(contents) / 1e3 if contents else 0.0,
        "walls": walls,
        "bodies_per_second": {k: len(blobs) / w if w else None for k, w in walls.items()},
        "speed_vs_full_parse": {k: full / w if w else None for k, w in walls.items()},
        "front_answer_differs": differ,
    }


def _report(title: str, result: dict[str, Any]) -> str:
    lines = [
        f"{title}: {result['bodies']} bodies, {result['mean_kilobytes']:.1f} kB on average",
        f"{'':18}{'bodies/s':>12}{'× full parse':>14}",
    ]
    for name, rate in result["bodies_per_second"].items():
        ratio = result["speed_vs_full_parse"][name]
        lines.append(f"{name:18}{rate:12,.0f}{ratio:14.2f}")
    lines.append(
        f"front-matter answer differs from the whole-parse answer: {result['front_answer_differs']}"
    )
    return "\n".join(lines)


def main(argv: Sequence[str] | None = None) -> int:
    """Run the measurement and print it (``--json`` for the raw figures)."""
    parser = argparse.ArgumentParser(prog="python -m benchmarks.frontmatter", description=__doc__)
    parser.add_argument("--n", type=int, default=2000, help="articles in the synthetic corpus")
    parser.add_argument("--real", type=int, default=1000, help="bodies of the real-article corpus")
    parser.add_argument("--seed", type=int, default=7)
    parser.add_argument("--repeat", type=int, default=3, help="passes; the best one counts")
    parser.add_argument("--json", action="store_true", help="print the figures as JSON")
    args = parser.parse_args(argv)
    results = {
        "synthetic corpus": measure(_bodies(args.n, args.seed), args.repeat),
        "real PMC articles": measure(_real_bodies(args.real), args.repeat),
    }
    if args.json:
        print(json.dumps(results, indent=2))
    else:
        print("\n\n".join(_report(title, result) for title, result in results.items()))
    return 1 if any(r["front_answer_differs"] for r in results.values()) else 0


if __name__ == "__main__":
    sys.exit(main())
