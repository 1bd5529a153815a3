"""The text methods of ``df.lit`` (:meth:`text`, :meth:`text_long` and their twins).

A mixin of :class:`~litfetch_df.frame.accessor.LitFrameAccessor`, kept apart so the
accessor stays one screenful per concern; like it, it holds nothing but the frame.
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from typing import Any, Unpack, cast

import pandas as pd

from ..operations.types import BatchResolver, Fetcher
from .engine.bridge import run_call
from .engine.context import CallOptions

__all__ = ["TextMethods"]


class TextMethods:
    """``df.lit.text()`` and ``df.lit.text_long()``: bodies read as text, wide and long."""

    _frame: pd.DataFrame

    async def text_async(
        self,
        *,
        math: str = "tex",
        out_dir: str | os.PathLike[str] | None = None,
        fetchers: Sequence[Fetcher] | None = None,
        resolver: BatchResolver | None = None,
        resolve: bool = True,
        force: bool = False,
        **config: Unpack[CallOptions],
    ) -> pd.DataFrame:
        """Awaitable twin of :meth:`text`."""
        from .fulltext import text

        fetch = {"fetchers": fetchers, "resolver": resolver, "resolve": resolve, "force": force}
        return await text(self._frame, math=math, out_dir=out_dir, fetch=fetch, config=config)

    def text(
        self,
        *,
        math: str = "tex",
        out_dir: str | os.PathLike[str] | None = None,
        fetchers: Sequence[Fetcher] | None = None,
        resolver: BatchResolver | None = None,
        resolve: bool = True,
        force: bool = False,
        **config: Unpack[CallOptions],
    ) -> pd.DataFrame:
        """Return a new frame with each row's body read as text (:mod:`litfetch_df.text`).

        Columns (:data:`~litfetch_df.frame.fulltext.TEXT_COLUMNS`): ``text_format``,
        ``title``, ``abstract``, ``other_abstracts``, ``keywords``, ``article_type``,
        ``body_text``, ``funding_statement``, ``data_availability``,
        ``competing_interests``, ``n_sections``, ``n_paragraphs``, ``n_references``,
        ``n_figures``, ``n_tables``, ``n_words``, ``text_loss`` (what was not
        rendered; ``''``: nothing) and ``text_error`` (a PDF or unreadable body).
        A frame without bodies gets them first (:meth:`fetch_bodies`' keywords);
        with ``out_dir`` the bodies and a ``.txt`` per body go there and
        ``text_path`` replaces ``body_text``. ``math``: ``'tex'`` or ``'placeholder'``.
        """
        from .fulltext import has_bodies, text_columns

        if has_bodies(self._frame):  # nothing to fetch: no event loop needed
            return text_columns(self._frame, math=math, out_dir=out_dir)
        return run_call(
            lambda: self.text_async(
                math=math,
                out_dir=out_dir,
                fetchers=fetchers,
                resolver=resolver,
                resolve=resolve,
                force=force,
                **config,
            ),
            config,
            "text",
        )

    async def text_long_async(self, part: str, *, math: str = "tex", **fetch: Any) -> pd.DataFrame:
        """Awaitable twin of :meth:`text_long`."""
        from .fulltext import has_bodies
        from .text_long import text_long

        frame = self._frame
        if not has_bodies(frame):
            frame = await frame.lit.fetch_bodies_async(**fetch)
        return text_long(frame, part, math=math)

    def text_long(self, part: str, *, math: str = "tex", **fetch: Any) -> pd.DataFrame:
        """Return one row per section, paragraph, reference, citation or caption of the bodies.

        ``part``: ``'sections'``, ``'paragraphs'``, ``'references'``, ``'citations'``
        or ``'captions'`` (figures, tables, supplementary files, boxes). The index
        repeats the original row labels and the row's ``pmid``/``pmcid``/``doi``/
        ``bookid`` come first, so it joins back (columns:
        :data:`~litfetch_df.frame.text_long.LONG_COLUMNS`). Without bodies they are
        fetched first (``fetch``: :meth:`fetch_bodies`' keywords).
        """
        from .fulltext import has_bodies
        from .text_long import text_long

        if has_bodies(self._frame):
            return text_long(self._frame, part, math=math)
        return run_call(
            lambda: self.text_long_async(part, math=math, **fetch),
            cast(CallOptions, fetch),
            "text_long",
        )
