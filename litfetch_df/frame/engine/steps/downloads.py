"""The downloads step: every file of a long file-set frame written under ``out_dir``.

One unit per distinct file: two rows (or two sources) listing the same URL
for one article download it once. Every row, done or not, claims its file's
name in row order, so names are decided by the listing, not by which download
finished first, and a re-run or ``force=True`` names every file as the first
call did.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
from collections.abc import Mapping, Sequence
from typing import Any, Final

import pandas as pd

from ....files import File
from ....ids import ArticleIds
from ....operations.fileset import download_file_to
from ....operations.types import FileSource
from ....session import Session
from ...io.columns import CANONICAL, bundle_key
from ...io.long import file_of_row, ids_columns
from ...io.outputs import open_out
from ...io.table import previous
from ..context import CallContext
from ..fill import fill
from ..outcome import INTERRUPTED, Outcome, is_abandoned, short
from ..plan import Plan
from ..runner import run_keyed

__all__ = ["download_files"]

_DTYPES: Final = {"path": "string", "size": "Int64", "fetch_error": "string"}


async def download_files(
    frame: pd.DataFrame,
    ctx: CallContext,
    out_dir: str | os.PathLike[str],
    *,
    sources: Sequence[FileSource] | None,
    force: bool,
) -> pd.DataFrame:
    """Download the files of long file-set ``frame`` into ``out_dir``; add ``path``, ``size``,
    ``fetch_error``. On a frame holding ``fetch_error``, only abandoned rows are fetched again."""
    out = open_out(out_dir)
    credentials = dict(ctx.options.credentials)
    rerun = "fetch_error" in frame.columns and not force
    before = previous(frame, "fetch_error") if rerun else []
    ids = ids_columns(frame)
    records = frame.to_dict("records")
    n = len(frame)
    todo: list[int] = []
    parse_errors: list[str | None] = [None] * n
    row_key: dict[int, File] = {}
    counts: dict[File, int] = {}
    owner: dict[File, ArticleIds] = {}
    # Two sources often list the same URL for one article (a PDF Unpaywall and Semantic
    # Scholar both know): it is downloaded once, through the first, and shared.
    same_url: dict[tuple[ArticleIds, str], File] = {}
    for i, record in enumerate(records):
        wanted = not rerun or is_abandoned(before[i])
        try:
            file = file_of_row({str(k): v for k, v in record.items()})
            article = ArticleIds(
                **{k: (str(ids[k][i]) if ids[k][i] is not None else None) for k in CANONICAL}
            )
        except (ValueError, TypeError) as exc:
            if wanted:
                parse_errors[i] = f"invalid file: {short(str(exc), 80)}"
                todo.append(i)
            continue
        if file.uri is not None:
            file = same_url.setdefault((bundle_key(article), file.uri), file)
        owner.setdefault(file, article)
        with contextlib.suppress(ValueError):  # an unwritable name fails in work()
            out.file_location(owner[file], file)
        if not wanted:
            continue
        todo.append(i)
        row_key[i] = file
        counts[file] = counts.get(file, 0) + 1

    async def work(http: Session, file: File) -> tuple[str, int] | None:
        # Streamed to a .part file beside its final name, never held whole (ADR 0015).
        # To a URL: streamed to a local temporary file, then sent whole.
        with out.staged(out.file_location(owner[file], file)) as stage:
            saved = await download_file_to(
                http, file, stage.path, sources=sources, credentials=credentials
            )
            if saved is None:
                return None
            where = await asyncio.to_thread(stage.commit)
        return where, saved.size

    plan = Plan(
        bundles=tuple(ArticleIds() for _ in range(n)),
        parse_errors=tuple(parse_errors),
        todo=tuple(todo),
        rerun=rerun,
    )

    def cells(value: tuple[str, int]) -> dict[str, object]:
        return {"path": value[0], "size": value[1]}

    def build(
        done: Mapping[File, Outcome[tuple[str, int] | None]], missing: Outcome[Any] | None
    ) -> pd.DataFrame:
        def row_outcome(i: int) -> Outcome[Any] | None:
            if i in row_key:
                return done.get(row_key[i], missing)
            return Outcome()

        return fill(frame, plan, row_outcome, cells, _DTYPES, "fetch_error")

    outcomes = await run_keyed(
        ctx,
        counts,
        work,
        "fetch_files",
        label=lambda _: "written",
        partial=lambda done: build(done, INTERRUPTED),
    )
    return build(outcomes, None)
