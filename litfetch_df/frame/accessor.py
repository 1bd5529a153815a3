"""The ``.lit`` accessor on :class:`pandas.DataFrame` (the Series one is in ``series_accessor``).

Every method returns a new frame (same index and row order, original columns
untouched, new columns with nullable dtypes) and never mutates its input. The
plain methods are synchronous and safe in Jupyter (see
:mod:`litfetch_df.frame.engine.bridge`); each has an awaitable twin named
``<method>_async`` for code that already runs in an event loop. Nothing is
stored on the accessor object: pandas builds a fresh one on every attribute
access.
"""

from __future__ import annotations

import os
from collections.abc import Hashable, Iterable, Sequence
from typing import Any, Unpack

import pandas as pd

from ..files import FileKind
from ..operations.types import BatchResolver, Fetcher, FileSource
from .engine import onepass, pipeline
from .engine.bridge import run_call as _run
from .engine.cost import STEPS_PLANNED
from .engine.pipeline import CallOptions
from .io.columns import IdColumns, detect_id_columns
from .summary import summarise
from .text_accessor import TextMethods
from .view import view as _view

__all__ = ["LitFrameAccessor"]


def _kind(kind: FileKind | str | None) -> FileKind | None:
    if kind is None or isinstance(kind, FileKind):
        return kind
    return FileKind(kind)


class LitFrameAccessor(TextMethods):
    """``df.lit``: identifiers, bodies, file-sets, licences and relations for every row."""

    def __init__(self, frame: pd.DataFrame) -> None:
        self._frame = frame

    # -- inspection ----------------------------------------------------------------------

    def id_columns(self, **names: Any) -> IdColumns:
        """Return which columns the methods read each id kind from (no request is sent).

        ``names`` (``pmid=``, ``doi=`` …) name columns explicitly, as on every
        method. Raises :class:`ValueError` when no id column can be found.
        """
        return detect_id_columns(self._frame.columns, names)

    def summary(self) -> pd.DataFrame:
        """Return a small frame counting resolved ids, bodies per source, licences and errors."""
        return summarise(self._frame)

    def plan(self, steps: Iterable[str] = STEPS_PLANNED, **options: Any) -> pd.DataFrame:
        """Return what ``run(steps)`` would ask, per host and kind, sending nothing.

        ``options``: ``session``, ``credentials``, ``contact``, ``latency``; see
        :func:`litfetch_df.frame.engine.cost.plan_for`.
        """
        from .engine.cost import plan_for

        return plan_for(self._frame, steps, **options)

    async def summary_async(self) -> pd.DataFrame:
        """Awaitable twin of :meth:`summary` (it sends no request)."""
        return summarise(self._frame)

    def view(self, *extra: Hashable) -> pd.DataFrame:
        """Return a new, narrow frame of what matters first; the display options are untouched.

        Columns, where the frame has them: ``pmid``, ``pmcid``, ``doi``,
        ``bookid``, then any ``extra`` columns named (a title, say), then
        ``body_source``, ``licence_family``, ``oa_status``, ``access``,
        ``body_size``, ``n_files``, ``n_related`` and the error columns. Same
        index and rows; no request is sent.
        """
        return _view(self._frame, extra)

    # -- saving --------------------------------------------------------------------------

    def to_parquet(self, path: str | os.PathLike[str], **kwargs: Any) -> None:
        """Write the frame to Parquet with every column the steps add (needs pyarrow).

        Bodies are saved as bytes with their file reference, ``files`` and
        ``related`` as lists of records; :func:`litfetch_df.read_parquet`
        gives the same frame back (see :mod:`litfetch_df.frame.io.parquet`).
        ``kwargs`` go to :func:`pyarrow.parquet.write_table`.
        """
        from .io.parquet import to_parquet

        to_parquet(self._frame, path, **kwargs)

    def to_csv(self, path: str | os.PathLike[str], **kwargs: Any) -> None:
        """Write the frame as CSV with plain columns; ids stay text (no ``.0`` on a PMID).

        Bodies are left out (their source, type and size stay), ``files``
        and ``related`` become text (see :mod:`litfetch_df.frame.io.export`).
        Read it back with :func:`litfetch_df.read_table`. ``kwargs`` go to
        :meth:`pandas.DataFrame.to_csv` (no index unless ``index=True``).
        """
        from .io.export import to_csv

        to_csv(self._frame, path, **kwargs)

    # -- everything in one pass -----------------------------------------------------------

    async def run_async(
        self,
        steps: str | Iterable[str] = onepass.DEFAULT_STEPS,
        *,
        fetchers: Sequence[Fetcher] | None = None,
        sources: Sequence[FileSource] | None = None,
        kind: FileKind | str | None = None,
        resolver: BatchResolver | None = None,
        out_dir: str | os.PathLike[str] | None = None,
        force: bool = False,
        **config: Unpack[CallOptions],
    ) -> pd.DataFrame:
        """Awaitable twin of :meth:`run`."""
        return await onepass.run(
            self._frame,
            steps=onepass.parse_steps(steps),
            fetchers=fetchers,
            sources=sources,
            kind=_kind(kind),
            resolver=resolver,
            out_dir=out_dir,
            force=force,
            config=config,
        )

    def run(
        self,
        steps: str | Iterable[str] = onepass.DEFAULT_STEPS,
        *,
        fetchers: Sequence[Fetcher] | None = None,
        sources: Sequence[FileSource] | None = None,
        kind: FileKind | str | None = None,
        resolver: BatchResolver | None = None,
        out_dir: str | os.PathLike[str] | None = None,
        force: bool = False,
        **config: Unpack[CallOptions],
    ) -> pd.DataFrame:
        """Return a new frame with every asked step's columns, worked out in one pass.

        ``steps``: any of ``'resolve'``, ``'bodies'``, ``'files'``,
        ``'licences'``, ``'related'`` (in any order, or one comma-separated
        string; default: the first four). The result has exactly the columns
        and values of the chained calls (``resolve()``, ``fetch_bodies()``,
        ``list_files()``, ``licences()``, ``related()``), but each distinct id
        bundle does all its steps together, so every host is busy at once and
        a record two steps read (Unpaywall's) is fetched once. ``resolve``
        runs first; without it the ids are read as they stand. ``fetchers``
        and ``out_dir`` are the bodies step's, ``sources`` and ``kind`` the
        file-set's. Calling it again on the result retries, per step, only
        the rows that step abandoned (``force=True``: every row). Raises
        :class:`ValueError` for an unknown step.
        """
        chosen = onepass.parse_steps(steps)  # a bad step fails here, before any request
        return _run(
            lambda: self.run_async(
                chosen,
                fetchers=fetchers,
                sources=sources,
                kind=kind,
                resolver=resolver,
                out_dir=out_dir,
                force=force,
                **config,
            ),
            config,
            "run",
        )

    # -- resolve -------------------------------------------------------------------------

    async def resolve_async(
        self,
        *,
        resolver: BatchResolver | None = None,
        force: bool = False,
        **config: Unpack[CallOptions],
    ) -> pd.DataFrame:
        """Awaitable twin of :meth:`resolve`."""
        return await pipeline.resolve(self._frame, resolver=resolver, force=force, config=config)

    def resolve(
        self,
        *,
        resolver: BatchResolver | None = None,
        force: bool = False,
        **config: Unpack[CallOptions],
    ) -> pd.DataFrame:
        """Return a new frame with canonical ``pmid``, ``pmcid``, ``doi``, ``bookid`` filled.

        Runs the batch pre-pass (``default_batch_resolver()`` unless
        ``resolver`` is given) once per distinct id bundle. Rows whose lookup
        was abandoned get ``"abandoned: …"`` in ``resolve_error``; invalid ids
        are reported there too. Calling it again on the result retries only
        abandoned rows (``force=True``: every row).
        """
        return _run(
            lambda: self.resolve_async(resolver=resolver, force=force, **config), config, "resolve"
        )

    # -- bodies --------------------------------------------------------------------------

    async def fetch_bodies_async(
        self,
        *,
        fetchers: Sequence[Fetcher] | None = None,
        resolver: BatchResolver | None = None,
        resolve: bool = True,
        out_dir: str | os.PathLike[str] | None = None,
        force: bool = False,
        **config: Unpack[CallOptions],
    ) -> pd.DataFrame:
        """Awaitable twin of :meth:`fetch_bodies`."""
        return await pipeline.fetch_bodies(
            self._frame,
            fetchers=fetchers,
            resolver=resolver,
            resolve=resolve,
            out_dir=out_dir,
            force=force,
            config=config,
        )

    def fetch_bodies(
        self,
        *,
        fetchers: Sequence[Fetcher] | None = None,
        resolver: BatchResolver | None = None,
        resolve: bool = True,
        out_dir: str | os.PathLike[str] | None = None,
        force: bool = False,
        **config: Unpack[CallOptions],
    ) -> pd.DataFrame:
        """Return a new frame with each row's full-text body from the fetcher ladder.

        Columns: ``body`` (the :class:`~litfetch_df.Blob`; with ``out_dir`` the
        bytes are written there and ``body_path`` replaces it), ``body_source``,
        ``body_media_type``, ``body_size``, ``body_error``. An unresolved frame
        is resolved first (``resolve=False`` skips that). ``fetchers`` defaults
        to ``default_fetchers()``.
        """
        return _run(
            lambda: self.fetch_bodies_async(
                fetchers=fetchers,
                resolver=resolver,
                resolve=resolve,
                out_dir=out_dir,
                force=force,
                **config,
            ),
            config,
            "fetch_bodies",
        )

    # -- licences ------------------------------------------------------------------------

    async def licences_async(
        self,
        *,
        resolver: BatchResolver | None = None,
        resolve: bool = True,
        force: bool = False,
        **config: Unpack[CallOptions],
    ) -> pd.DataFrame:
        """Awaitable twin of :meth:`licences`."""
        return await pipeline.licences(
            self._frame, resolver=resolver, resolve=resolve, force=force, config=config
        )

    def licences(
        self,
        *,
        resolver: BatchResolver | None = None,
        resolve: bool = True,
        force: bool = False,
        **config: Unpack[CallOptions],
    ) -> pd.DataFrame:
        """Return a new frame with ``licence``, ``access``, ``oa_status``, bases, ``licence_error``.

        Terms come from the body bytes where the frame holds them (basis
        ``'artifact'``); what the bytes leave out, or all of it without a
        body, from Unpaywall by DOI (basis ``'unpaywall'``, which needs a
        contact email). ``licence_basis`` and ``access_basis`` say which
        basis gave the licence and the access status. ``oa_status`` is one
        status per row (``gold``, ``hybrid``, ``bronze``, ``green``,
        ``closed``) from Unpaywall, asked for every row with a DOI; NA when
        Unpaywall did not classify the article (a body's ``open-access``
        names no colour).
        """
        return _run(
            lambda: self.licences_async(resolver=resolver, resolve=resolve, force=force, **config),
            config,
            "licences",
        )

    # -- file-sets -----------------------------------------------------------------------

    async def list_files_async(
        self,
        *,
        sources: Sequence[FileSource] | None = None,
        kind: FileKind | str | None = None,
        resolver: BatchResolver | None = None,
        resolve: bool = True,
        force: bool = False,
        **config: Unpack[CallOptions],
    ) -> pd.DataFrame:
        """Awaitable twin of :meth:`list_files`."""
        return await pipeline.list_files(
            self._frame,
            sources=sources,
            kind=_kind(kind),
            resolver=resolver,
            resolve=resolve,
            force=force,
            config=config,
        )

    def list_files(
        self,
        *,
        sources: Sequence[FileSource] | None = None,
        kind: FileKind | str | None = None,
        resolver: BatchResolver | None = None,
        resolve: bool = True,
        force: bool = False,
        **config: Unpack[CallOptions],
    ) -> pd.DataFrame:
        """Return a new frame with each row's file-set: ``files`` (a tuple), ``n_files``,
        ``files_error``. ``kind`` (``'body'`` / ``'supplementary'``) filters."""
        return _run(
            lambda: self.list_files_async(
                sources=sources,
                kind=kind,
                resolver=resolver,
                resolve=resolve,
                force=force,
                **config,
            ),
            config,
            "list_files",
        )

    async def files_async(
        self,
        *,
        sources: Sequence[FileSource] | None = None,
        kind: FileKind | str | None = None,
        resolver: BatchResolver | None = None,
        resolve: bool = True,
        **config: Unpack[CallOptions],
    ) -> pd.DataFrame:
        """Awaitable twin of :meth:`files`."""
        return await pipeline.files(
            self._frame,
            sources=sources,
            kind=_kind(kind),
            resolver=resolver,
            resolve=resolve,
            config=config,
        )

    def files(
        self,
        *,
        sources: Sequence[FileSource] | None = None,
        kind: FileKind | str | None = None,
        resolver: BatchResolver | None = None,
        resolve: bool = True,
        **config: Unpack[CallOptions],
    ) -> pd.DataFrame:
        """Return the tidy file-set: one row per file, indexed by the original row labels.

        Columns: the row's ``pmid``/``pmcid``/``doi``/``bookid``, then
        ``kind``, ``source``, ``media_type``, ``uri``, ``filename``,
        ``size_bytes``, ``credential_key``, ``description``. Lists the files
        first unless the frame was listed before (it holds ``files_error`` or
        a ``files`` column of File tuples; no request then).
        """
        if pipeline.is_listed(self._frame):
            return pipeline.files_long(self._frame)
        return _run(
            lambda: self.files_async(
                sources=sources, kind=kind, resolver=resolver, resolve=resolve, **config
            ),
            config,
            "files",
        )

    async def fetch_files_async(
        self,
        out_dir: str | os.PathLike[str],
        *,
        sources: Sequence[FileSource] | None = None,
        kind: FileKind | str | None = None,
        force: bool = False,
        **config: Unpack[CallOptions],
    ) -> pd.DataFrame:
        """Awaitable twin of :meth:`fetch_files`."""
        return await pipeline.fetch_files(
            self._frame, out_dir, sources=sources, kind=_kind(kind), force=force, config=config
        )

    def fetch_files(
        self,
        out_dir: str | os.PathLike[str],
        *,
        sources: Sequence[FileSource] | None = None,
        kind: FileKind | str | None = None,
        force: bool = False,
        **config: Unpack[CallOptions],
    ) -> pd.DataFrame:
        """Download each file of the long file-set frame into ``out_dir``.

        Returns a new frame with ``path``, ``size`` and ``fetch_error``. Files
        land at ``<out_dir>/<article>/<safe filename>``, written atomically;
        hostile names cannot leave ``out_dir``. Called on a frame that is not
        long yet, it lists the file-set first (as :meth:`files`).
        """
        return _run(
            lambda: self.fetch_files_async(
                out_dir, sources=sources, kind=kind, force=force, **config
            ),
            config,
            "fetch_files",
        )

    # -- relations -----------------------------------------------------------------------

    async def related_async(
        self,
        *,
        resolver: BatchResolver | None = None,
        resolve: bool = True,
        force: bool = False,
        **config: Unpack[CallOptions],
    ) -> pd.DataFrame:
        """Awaitable twin of :meth:`related`."""
        return await pipeline.related(
            self._frame, resolver=resolver, resolve=resolve, force=force, config=config
        )

    def related(
        self,
        *,
        resolver: BatchResolver | None = None,
        resolve: bool = True,
        force: bool = False,
        **config: Unpack[CallOptions],
    ) -> pd.DataFrame:
        """Return a new frame with preprint / published counterparts per row.

        Columns: ``related`` (a tuple of :class:`~litfetch_df.Related`),
        ``n_related``, ``preprint_doi``, ``published_doi``, ``related_error``.
        """
        return _run(
            lambda: self.related_async(resolver=resolver, resolve=resolve, force=force, **config),
            config,
            "related",
        )

    async def relations_async(
        self,
        *,
        resolver: BatchResolver | None = None,
        resolve: bool = True,
        **config: Unpack[CallOptions],
    ) -> pd.DataFrame:
        """Awaitable twin of :meth:`relations`."""
        return await pipeline.relations(
            self._frame, resolver=resolver, resolve=resolve, config=config
        )

    def relations(
        self,
        *,
        resolver: BatchResolver | None = None,
        resolve: bool = True,
        **config: Unpack[CallOptions],
    ) -> pd.DataFrame:
        """Return the long form of :meth:`related`: one row per relation (``relation``,
        ``related_doi`` and the row's ids), indexed by the original row labels."""
        if "related" in self._frame.columns:
            return pipeline.relations_long(self._frame)
        return _run(
            lambda: self.relations_async(resolver=resolver, resolve=resolve, **config),
            config,
            "relations",
        )
