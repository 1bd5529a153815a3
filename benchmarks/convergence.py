"""Compare the frame a faulted run converged to with the frame of the same run without faults.

Both frames come from :func:`benchmarks.client.row_digests` (every cell in a
short comparable form, bodies by hash), row for row in input order, so a
difference is a row whose ids, body, file-set, licence or error differ
between the two runs: something the faults took away that the re-runs did
not give back.
"""

from __future__ import annotations

import collections
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

__all__ = ["Comparison", "compare", "differing_rows", "round_lines"]

ID_COLUMNS = ("pmid", "pmcid", "doi", "bookid")
"""Columns :func:`differing_rows` shows for every differing row, to name the article."""


@dataclass(frozen=True, slots=True)
class Comparison:
    """How the faulted frame differs from the clean one."""

    rows: int
    rows_differing: int
    columns: dict[str, int] = field(default_factory=dict)
    """Rows differing, per column."""
    example: dict[str, tuple[str, str]] = field(default_factory=dict)
    """One differing cell per column: (clean, faulted), cut around where they differ."""


def compare(clean: Sequence[Mapping[str, str]], faulted: Sequence[Mapping[str, str]]) -> Comparison:
    """Return the rows and columns where ``faulted`` differs from ``clean``."""
    if len(clean) != len(faulted):
        return Comparison(rows=max(len(clean), len(faulted)), rows_differing=-1)
    per_column: collections.Counter[str] = collections.Counter()
    example: dict[str, tuple[str, str]] = {}
    differing = 0
    for a, b in zip(clean, faulted, strict=True):
        columns = [c for c in dict.fromkeys([*a, *b]) if a.get(c, "NA") != b.get(c, "NA")]
        differing += bool(columns)
        for c in columns:
            per_column[c] += 1
            if c not in example:
                example[c] = _around_difference(a.get(c, "NA"), b.get(c, "NA"))
    return Comparison(len(clean), differing, dict(per_column.most_common()), example)


def differing_rows(
    clean: Sequence[Mapping[str, str]], faulted: Sequence[Mapping[str, str]]
) -> list[dict[str, Any]]:
    """Every row where ``faulted`` differs from ``clean``, for a look at why.

    Each entry holds the row's position, its ids (as in the clean frame) and,
    per differing column, the clean and the faulted cell in full.
    """
    rows: list[dict[str, Any]] = []
    for i, (a, b) in enumerate(zip(clean, faulted, strict=False)):
        columns = [c for c in dict.fromkeys([*a, *b]) if a.get(c, "NA") != b.get(c, "NA")]
        if columns:
            rows.append(
                {
                    "row": i,
                    "ids": {c: a[c] for c in ID_COLUMNS if a.get(c, "NA") != "NA"},
                    "differ": {
                        c: {"clean": a.get(c, "NA"), "faulted": b.get(c, "NA")} for c in columns
                    },
                }
            )
    return rows


def _around_difference(a: str, b: str, width: int = 120) -> tuple[str, str]:
    """Both texts cut to ``width`` characters around where they first differ."""
    same = zip(a, b, strict=False)
    start = next((i for i, (x, y) in enumerate(same) if x != y), min(len(a), len(b)))
    start = max(0, start - width // 3)
    mark = "…" if start else ""
    return mark + a[start : start + width], mark + b[start : start + width]


def round_lines(rounds: Sequence[Mapping[str, Any]]) -> str:
    """One entry per round: its wall time and the rows still unfinished after it, per column."""
    parts = []
    for r in rounds:
        left = r.get("unfinished", {})
        shown = ", ".join(f"{c} {n}" for c, n in left.items()) or "none"
        parts.append(f"round {r.get('round')}: {float(r.get('wall', 0.0)):.1f} s, left {shown}")
    return "; ".join(parts)
