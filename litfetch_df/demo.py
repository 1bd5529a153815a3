"""The offline demo: the whole pipeline on a bundled export of real articles, with no network.

The package ships, in ``litfetch_df/data/demo/``:

* ``pubmed-demo.csv``: a small table in the columns of PubMed's "Save → CSV"
  export, naming real articles, with some identifier cells left blank so that
  :meth:`~litfetch_df.frame.accessor.LitFrameAccessor.resolve` has work to do;
* ``records/``: the recorded upstream answers and PMC JATS files about those
  articles (copies of ``tests/data/``, written by ``tools/build_demo.py``).

:func:`demo_session` returns a session whose every request is answered by the
demo world (:mod:`litfetch_df.demo_world`) from those records, per article:
any subset, order or repetition of the demo rows gets the same per-row
answers. :func:`run_demo` reads the export, runs resolve → bodies → file-sets
→ licences → relations on such a session, prints a summary and writes the
result. What the records do not state is reported as not found, and
docs/demo-data.md says which facts are recorded and which are implied.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Mapping
from importlib import resources
from pathlib import Path
from typing import IO, Any, Final

import pandas as pd

from . import frame as _frame  # noqa: F401  (importing it registers the .lit accessor)
from .cli.results import summary_text, write_result
from .demo_world import DEMO_CONTACT, world_session
from .frame.accessor import LitFrameAccessor
from .frame.engine.bridge import run_sync
from .frame.engine.options import ENV_CREDENTIALS
from .frame.io.readers import read_pubmed
from .metadata import Related
from .session import Session

__all__ = [
    "DEMO_CONTACT",
    "DEMO_DIR",
    "article_table",
    "copy_demo_cache",
    "demo_export_bytes",
    "demo_session",
    "load_demo_export",
    "run_demo",
    "run_pipeline",
]

DEMO_DIR: Final = "data/demo"
"""Where the demo files live inside the package."""

EXPORT_NAME: Final = "pubmed-demo.csv"
"""File name of the bundled export."""

CACHE_NAME: Final = "responses.sqlite3"
"""File name of the cache :func:`copy_demo_cache` writes."""

PIPELINE_STEPS: Final = ("resolve", "bodies", "files", "licences", "related")
"""The steps the demo runs: all of them."""

# Every credentials key set to None: merged over the package options this removes any key
# read from the environment, so the demo asks what the keyless records answer.
NO_CREDENTIALS: Final[Mapping[str, object]] = {key: None for key in ENV_CREDENTIALS.values()}


def _data(name: str) -> resources.abc.Traversable:
    return resources.files("litfetch_df").joinpath(DEMO_DIR, name)


def demo_export_bytes() -> bytes:
    """Return the bytes of the bundled PubMed-style export (``pubmed-demo.csv``)."""
    return _data(EXPORT_NAME).read_bytes()


def load_demo_export() -> pd.DataFrame:
    """Return the bundled export read with :func:`~litfetch_df.frame.io.readers.read_pubmed`.

    One row per article; every column is nullable text. No request is made.
    """
    return read_pubmed(demo_export_bytes(), format="csv")


def demo_session(**session_options: Any) -> Session:
    """Return a not-yet-entered :class:`Session` answered by the demo world, with no network.

    Every request goes to :class:`~litfetch_df.demo_world.DemoWorld` through an
    in-process transport: no request can reach a real host, and any slice of
    the demo frame gets the same per-row answers. ``session_options`` go to
    :class:`Session` (``timeout=``, or ``cache=`` to keep the world's answers);
    ``contact`` is fixed to :data:`DEMO_CONTACT`. Use it as the ``session=`` of
    any ``.lit`` call on :func:`load_demo_export`'s frame: those calls ignore
    the credentials of the package options (the records were made without
    keys); keys passed to a call itself still apply. A frame it made remembers
    it, so a later step on that frame is answered by the world too.
    """
    return world_session(**session_options)


def copy_demo_cache(directory: str | os.PathLike[str]) -> Path:
    """Write the demo world's answers to the demo pipeline into a cache in ``directory``.

    Runs :func:`run_pipeline` on the bundled export through :func:`demo_session`
    with ``cache=directory`` (created if missing) and returns the cache file,
    ``<directory>/responses.sqlite3``: a cache as a live run with ``cache=``
    would have left it, to replay with ``offline=True`` and
    ``contact=DEMO_CONTACT``. No request leaves the machine.
    """
    target = Path(directory)
    target.mkdir(parents=True, exist_ok=True)
    frame = load_demo_export()

    async def record() -> None:
        async with demo_session(cache=target) as session:
            await run_pipeline(frame, session=session)

    run_sync(record, name="litfetch_df-demo-cache")
    return target / CACHE_NAME


async def run_pipeline(
    frame: pd.DataFrame,
    *,
    session: Session,
    progress: bool | None = False,
) -> pd.DataFrame:
    """Run resolve, bodies, file-sets, licences and relations on ``frame``; return the result.

    One :meth:`~litfetch_df.frame.accessor.LitFrameAccessor.run` call does
    them all. ``session`` must be open (``async with``). Credentials from the
    environment are ignored, as the demo's records were made without keys.
    """
    return await LitFrameAccessor(frame).run_async(
        PIPELINE_STEPS, session=session, progress=progress, credentials=NO_CREDENTIALS
    )


def _short(value: object, width: int) -> object:
    if not isinstance(value, str) or len(value) <= width:
        return value
    return value[: width - 1] + "…"


def _related_text(value: object) -> str | None:
    if not isinstance(value, tuple | list) or not value:
        return None
    shown = [f"{r.relation.value} {r.ids.doi}" for r in value if isinstance(r, Related)]
    return "; ".join(shown) or None


def _article(row: Mapping[str, object]) -> str | None:
    for kind in ("pmcid", "doi", "pmid"):
        value = row.get(kind)
        if isinstance(value, str):
            return value
    return None


def article_table(result: pd.DataFrame, *, width: int | None = 48) -> pd.DataFrame:
    """Return one compact row per article of a demo (or any pipeline) result.

    Columns: ``article`` (PMCID, else DOI, else PMID), ``body`` (the body's
    source), ``licence`` (its family where the frame has ``licence_family``),
    ``access``, ``n_files``, ``related`` (``"published
    <doi>"`` / ``"preprint <doi>"``) and ``problems`` (the steps whose error
    column is set). Text longer than ``width`` characters is shortened with
    ``…`` (``width=None`` keeps it whole).
    """
    records = result.to_dict("records")
    errors = [c for c in result.columns if isinstance(c, str) and c.endswith("_error")]
    rows: list[dict[str, object]] = []
    for record in records:
        row = {str(k): v for k, v in record.items()}
        failed = [c.removesuffix("_error") for c in errors if isinstance(row.get(c), str)]
        rows.append(
            {
                "article": _article(row),
                "body": row.get("body_source"),
                # The family where the frame has one: short, and the same for one
                # licence however its sources wrote it.
                "licence": row.get("licence_family", row.get("licence")),
                "access": row.get("access"),
                "n_files": row.get("n_files"),
                "related": _related_text(row.get("related")),
                "problems": ", ".join(failed) or None,
            }
        )
    table = pd.DataFrame(rows, index=result.index)
    for column in ("article", "body", "licence", "access", "related", "problems"):
        values = [None if pd.isna(v) else v for v in table[column].tolist()]
        if width is not None:
            values = [_short(v, width) for v in values]
        table[column] = pd.array(values, dtype="string")
    table["n_files"] = pd.array(
        [None if pd.isna(v) else int(v) for v in table["n_files"].tolist()], dtype="Int64"
    )
    return table


def _print_report(result: pd.DataFrame, stream: IO[str]) -> None:
    table = article_table(result)
    with pd.option_context("display.width", 200, "display.max_columns", 20):
        stream.write("Summary\n=======\n")
        stream.write(summary_text(result) + "\n\n")
        stream.write("Articles\n========\n")
        shown = table.astype(object).where(table.notna(), "-")
        stream.write(shown.to_string() + "\n\n")
    stream.write(
        "Offline demo: every answer comes from records of these articles; what they do not "
        "state is reported as not found (docs/demo-data.md says what is recorded and what "
        "is implied).\n"
    )


def run_demo(
    output: str | os.PathLike[str] | None = None,
    *,
    progress: bool | None = False,
    stream: IO[str] | None = None,
) -> pd.DataFrame:
    """Run the whole pipeline offline on the bundled export and return the result frame.

    Reads the export, runs it on :func:`demo_session` (no request leaves the
    machine), prints a summary and a per-article table to ``stream`` (default
    ``sys.stdout``) and, when ``output`` is given, writes the result there as
    CSV, TSV or Parquet (chosen by suffix; bodies appear as source and size,
    not bytes, and file-sets and relations as counts and text). Returns the
    full frame, whose ``body`` column holds the :class:`~litfetch_df.Blob`
    objects. Works in a script, a thread and a running Jupyter event loop alike.
    """
    out_stream = stream if stream is not None else sys.stdout
    frame = load_demo_export()

    async def main() -> pd.DataFrame:
        async with demo_session() as session:
            return await run_pipeline(frame, session=session, progress=progress)

    result = run_sync(main, name="litfetch_df-demo")
    _print_report(result, out_stream)
    if output is not None:
        written = write_result(result, output)
        out_stream.write("\nWrote " + ", ".join(str(p) for p in written) + "\n")
    return result
