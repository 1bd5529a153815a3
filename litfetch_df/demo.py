"""The offline demo: the whole pipeline on a bundled export of real articles, with no network.

The package ships two data files in ``litfetch_df/data/demo/``:

* ``pubmed-demo.csv``: a small table in the columns of PubMed's "Save → CSV"
  export, naming real articles, with some identifier cells left blank so that
  :meth:`~litfetch_df.frame.accessor.LitFrameAccessor.resolve` has work to do;
* ``responses.sqlite3``: a replay cache (:class:`~litfetch_df.cache.ResponseCache`)
  holding the upstream answers for those articles, recorded once by
  ``tools/build_demo.py`` from facts held in ``tests/data/``.

:func:`run_demo` reads the export, runs resolve → bodies → file-sets →
licences → relations through an offline :class:`~litfetch_df.Session` on a
private copy of the cache, prints a summary and writes the result. A request
the cache cannot answer is reported in the row's error column as ``abandoned:
not in cache: …`` — the build only recorded answers it could state truthfully
(see docs/demo-data.md).
"""

from __future__ import annotations

import atexit
import math
import os
import shutil
import sys
import tempfile
from collections.abc import Mapping
from importlib import resources
from pathlib import Path
from typing import IO, Any, Final

import pandas as pd

from . import frame as _frame  # noqa: F401  (importing it registers the .lit accessor)
from ._results import summary_text, write_result
from .cache import ResponseCache
from .frame.accessor import LitFrameAccessor
from .frame.bridge import run_sync
from .frame.options import ENV_CREDENTIALS
from .frame.readers import read_pubmed
from .metadata import Related
from .session import Session

__all__ = [
    "DEMO_CONTACT",
    "DEMO_DIR",
    "article_table",
    "copy_demo_cache",
    "demo_cache_bytes",
    "demo_export_bytes",
    "demo_session",
    "load_demo_export",
    "run_demo",
    "run_pipeline",
]

DEMO_CONTACT: Final = "demo@litfetch-df.invalid"
"""The contact address the demo cache was recorded with.

The contact is part of several requests (NCBI ``email``, Crossref ``mailto``,
Unpaywall ``email``), so a replay must send the same one. ``.invalid`` is a
reserved domain: the address reaches nobody.
"""

DEMO_DIR: Final = "data/demo"
"""Where the demo files live inside the package."""

EXPORT_NAME: Final = "pubmed-demo.csv"
"""File name of the bundled export."""

CACHE_NAME: Final = "responses.sqlite3"
"""File name of the bundled replay cache."""

PIPELINE_STEPS: Final = ("resolve", "bodies", "files", "licences", "related")
"""The steps the demo runs: all of them."""

# Every credentials key set to None: merged over the package options this removes any key
# read from the environment, so the demo sends exactly the requests that were recorded.
NO_CREDENTIALS: Final[Mapping[str, object]] = {key: None for key in ENV_CREDENTIALS.values()}


def _data(name: str) -> resources.abc.Traversable:
    return resources.files("litfetch_df").joinpath(DEMO_DIR, name)


def demo_export_bytes() -> bytes:
    """Return the bytes of the bundled PubMed-style export (``pubmed-demo.csv``)."""
    return _data(EXPORT_NAME).read_bytes()


def demo_cache_bytes() -> bytes:
    """Return the bytes of the bundled replay cache (``responses.sqlite3``)."""
    return _data(CACHE_NAME).read_bytes()


def load_demo_export() -> pd.DataFrame:
    """Return the bundled export read with :func:`~litfetch_df.frame.readers.read_pubmed`.

    One row per article; every column is nullable text. No request is made.
    """
    return read_pubmed(demo_export_bytes(), format="csv")


def copy_demo_cache(directory: str | os.PathLike[str]) -> Path:
    """Copy the bundled replay cache into ``directory`` (created if missing); return the file.

    SQLite writes a journal beside any database it opens, and the package may be
    installed read-only, so the demo always replays from a copy.
    """
    target = Path(directory)
    target.mkdir(parents=True, exist_ok=True)
    path = target / CACHE_NAME
    path.write_bytes(demo_cache_bytes())
    return path


def _open_cache(directory: str | os.PathLike[str]) -> ResponseCache:
    # The recording is replayed however old it is: a TTL would make the demo rot.
    return ResponseCache(copy_demo_cache(directory), ttl=math.inf)


class _DemoSession(Session):
    """An offline session over the demo recording.

    ``keyless_replay`` tells the ``.lit`` calls it serves to ignore the
    package-level credentials: the recording was made without keys.
    """

    keyless_replay: Final = True


def _replay(store: ResponseCache, **session_options: Any) -> Session:
    return _DemoSession(contact=DEMO_CONTACT, cache=store, offline=True, **session_options)


def demo_session(**session_options: Any) -> Session:
    """Return a not-yet-entered offline :class:`Session` that replays the demo cache.

    The cache is a private copy in a temporary directory removed when the
    process exits. ``session_options`` go to :class:`Session` (for example
    ``timeout=``); ``contact`` is fixed to :data:`DEMO_CONTACT` and ``cache``,
    ``offline`` and ``cache_ttl`` are set here. Use it as the ``session=`` of
    any ``.lit`` call on :func:`load_demo_export`'s frame: those calls ignore
    the credentials of the package options (read from the environment, say),
    since the recording was made without keys and a key would only ask for
    requests it does not hold; keys passed to a call itself still apply.
    """
    for fixed in ("contact", "cache", "offline", "cache_ttl"):
        if fixed in session_options:
            raise TypeError(f"demo_session() sets {fixed} itself")
    directory = tempfile.mkdtemp(prefix="litfetch-df-demo-")
    store = _open_cache(directory)

    def cleanup() -> None:
        store.close()
        shutil.rmtree(directory, ignore_errors=True)

    atexit.register(cleanup)
    return _replay(store, **session_options)


async def run_pipeline(
    frame: pd.DataFrame,
    *,
    session: Session,
    progress: bool | None = False,
) -> pd.DataFrame:
    """Run resolve, bodies, file-sets, licences and relations on ``frame``; return the result.

    One :meth:`~litfetch_df.frame.accessor.LitFrameAccessor.run` call does
    them all. This is exactly the set of requests the demo cache was
    recorded from (``tools/build_demo.py`` calls it too), so keep the two in
    step. ``session`` must be open (``async with``). Credentials from the
    environment are ignored, so a replay asks for what was recorded.
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
        "'abandoned: not in cache' marks a request the demo recording holds no answer for "
        "(see docs/demo-data.md); live, it would be asked upstream.\n"
    )


def run_demo(
    output: str | os.PathLike[str] | None = None,
    *,
    progress: bool | None = False,
    stream: IO[str] | None = None,
) -> pd.DataFrame:
    """Run the whole pipeline offline on the bundled export and return the result frame.

    Reads the export, replays the bundled cache from a temporary copy (no
    request leaves the machine: the session is offline), prints a summary
    and a per-article table to ``stream`` (default ``sys.stdout``) and, when
    ``output`` is given, writes the result there as CSV, TSV or Parquet
    (chosen by suffix; bodies appear as source and size, not bytes, and
    file-sets and relations as counts and text). Returns the full frame,
    whose ``body`` column holds the :class:`~litfetch_df.Blob` objects.
    Works in a script, a thread and a running Jupyter event loop alike.
    """
    out_stream = stream if stream is not None else sys.stdout
    frame = load_demo_export()
    with tempfile.TemporaryDirectory(prefix="litfetch-df-demo-") as tmp:
        store = _open_cache(tmp)
        try:

            async def main() -> pd.DataFrame:
                async with _replay(store) as session:
                    return await run_pipeline(frame, session=session, progress=progress)

            result = run_sync(main, name="litfetch_df-demo")
        finally:
            store.close()
    _print_report(result, out_stream)
    if output is not None:
        written = write_result(result, output)
        out_stream.write("\nWrote " + ", ".join(str(p) for p in written) + "\n")
    return result
