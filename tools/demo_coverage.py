"""Print the demo's coverage as Markdown tables: what the bundled articles show, offline.

Run from the repository root (no network is used; the demo world answers)::

    .venv/bin/python tools/demo_coverage.py

It runs the demo pipeline (resolve, bodies, file-sets, licences, relations) on
the bundled export, downloads every listed file that needs no subscription
into a temporary folder, and prints, for the bundled articles: bodies per
source, files per kind and source (listed and downloaded), licences, open-access
status and relations. ``docs/demo-data.md`` quotes these tables; the issue note
on the demo's coverage is made from them.
"""

from __future__ import annotations

import io
import sys
import tempfile
from collections.abc import Iterable
from pathlib import Path

import pandas as pd

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from litfetch_df import Related  # noqa: E402
from litfetch_df.demo import demo_session, run_demo  # noqa: E402
from litfetch_df.frame.accessor import LitFrameAccessor  # noqa: E402

NONE = "(none)"


def _table(title: str, header: tuple[str, ...], rows: Iterable[tuple[object, ...]]) -> str:
    lines = [f"**{title}**", "", "| " + " | ".join(header) + " |"]
    lines.append("|" + "---|" * len(header))
    lines += ["| " + " | ".join(str(cell) for cell in row) + " |" for row in rows]
    return "\n".join(lines) + "\n"


def _counts(values: pd.Series) -> list[tuple[object, int]]:
    filled = values.astype(object).where(values.notna(), NONE)
    return sorted(filled.value_counts().items(), key=lambda kv: (-kv[1], str(kv[0])))


def _pair_counts(frame: pd.DataFrame, first: str, second: str) -> list[tuple[object, ...]]:
    """Count the rows per (first, second) value pair, a missing value shown as (none)."""
    pairs = frame[[first, second]].astype(object).where(frame[[first, second]].notna(), NONE)
    counted = pairs.groupby([first, second]).size().reset_index(name="n")
    return [tuple(row) for row in counted.itertuples(index=False)]


def coverage_tables(result: pd.DataFrame, fetched: pd.DataFrame) -> list[str]:
    """Return the coverage tables of a demo ``result`` and its downloaded files ``fetched``."""
    n = len(result)
    tables = [
        _table(
            f"Bodies per source ({n} articles)",
            ("body source", "articles"),
            _counts(result["body_source"]),
        )
    ]
    files = fetched.assign(downloaded=fetched["path"].notna())
    by_kind = (
        files.groupby(["kind", "source"], observed=True)["downloaded"]
        .agg(["size", "sum"])
        .reset_index()
    )
    tables.append(
        _table(
            f"Files per kind and source ({len(files)} listed, {int(files['downloaded'].sum())}"
            " downloaded)",
            ("kind", "source", "listed", "downloaded"),
            by_kind.itertuples(index=False),
        )
    )
    tables.append(
        _table(
            "Licences",
            ("licence family", "basis", "articles"),
            _pair_counts(result, "licence_family", "licence_basis"),
        )
    )
    tables.append(
        _table(
            "Access terms (as stated) and open-access status",
            ("access", "oa_status", "articles"),
            _pair_counts(result, "access", "oa_status"),
        )
    )
    relations: list[tuple[object, ...]] = []
    for doi, related in zip(result["doi"], result["related"], strict=True):
        for item in related if isinstance(related, tuple | list) else ():
            if isinstance(item, Related):
                relations.append((doi, item.relation.value, item.ids.doi))
    tables.append(_table("Relations", ("article", "relation", "to"), relations or [(NONE,) * 3]))
    return tables


def main() -> int:
    """Run the demo, download its files and print the coverage tables; return 0."""
    result = run_demo(stream=io.StringIO())
    files = LitFrameAccessor(result).files()
    wanted = files[files["credential_key"].isna()]
    with tempfile.TemporaryDirectory(prefix="litfetch-demo-coverage-") as folder:
        fetched = LitFrameAccessor(wanted).fetch_files(
            folder, session=demo_session(), progress=False
        )
    print("\n".join(coverage_tables(result, fetched)))
    return 0


if __name__ == "__main__":
    sys.exit(main())
