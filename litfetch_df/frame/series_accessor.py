"""The ``.lit`` accessor on :class:`pandas.Series`: a column of identifiers as a one-column frame.

Each method builds a frame holding the series under the name of its id kind
(given, recognised from the series' name, or sniffed from its values) and
calls the DataFrame accessor's method of the same name.
"""

from __future__ import annotations

from typing import Any

import pandas as pd

from .accessor import LitFrameAccessor
from .io.columns import CANONICAL, kind_of_name, sniff_kind

__all__ = ["LitSeriesAccessor"]


class LitSeriesAccessor:
    """``s.lit``: the DataFrame methods for a Series holding one id kind.

    The kind comes from ``kind=``, else the Series name (``'DOI'``, ``'PMID'``
    …), else the values. Every method returns a DataFrame with the Series as
    its first column.
    """

    def __init__(self, series: pd.Series[Any]) -> None:
        self._series = series

    def kind(self, kind: str | None = None) -> str:
        """Return the id kind this Series holds (``'pmid'``, ``'pmcid'``, ``'doi'``, ``'bookid'``).

        Raises :class:`ValueError` when neither the name nor the values tell.
        """
        if kind is not None:
            if kind not in ("pmid", "pmcid", "doi", "bookid"):
                raise ValueError(f"kind must be pmid, pmcid, doi or bookid, not {kind!r}")
            return kind
        named = kind_of_name(self._series.name) if self._series.name is not None else None
        found = named or sniff_kind(self._series.tolist())
        if found is None:
            raise ValueError(
                f"cannot tell which id kind Series {self._series.name!r} holds; pass "
                "kind='pmid' / 'pmcid' / 'doi' / 'bookid'"
            )
        return found

    def _frame(self, kind: str | None) -> tuple[pd.DataFrame, dict[str, Any]]:
        which = self.kind(kind)
        label = self._series.name if self._series.name is not None else which
        if label in CANONICAL and label != which:
            # Named for another kind (a Series 'pmid' holding DOIs): the steps would write
            # that kind's canonical column over it, so it goes by its own kind's name.
            label = which
        return self._series.to_frame(name=label), {which: label}

    def _lit(self, kind: str | None) -> tuple[LitFrameAccessor, dict[str, Any]]:
        frame, explicit = self._frame(kind)
        return LitFrameAccessor(frame), explicit

    def run(self, *args: Any, kind: str | None = None, **kwargs: Any) -> pd.DataFrame:
        """Run the asked steps in one pass; see :meth:`LitFrameAccessor.run`.

        ``kind`` is the Series' id kind here (the file-set filter is not available).
        """
        lit, explicit = self._lit(kind)
        return lit.run(*args, **{**kwargs, **explicit})

    async def run_async(self, *args: Any, kind: str | None = None, **kwargs: Any) -> pd.DataFrame:
        """Awaitable twin of :meth:`run`."""
        lit, explicit = self._lit(kind)
        return await lit.run_async(*args, **{**kwargs, **explicit})

    def resolve(self, *, kind: str | None = None, **kwargs: Any) -> pd.DataFrame:
        """Resolve the ids; see :meth:`LitFrameAccessor.resolve`."""
        lit, explicit = self._lit(kind)
        return lit.resolve(**{**kwargs, **explicit})

    async def resolve_async(self, *, kind: str | None = None, **kwargs: Any) -> pd.DataFrame:
        """Awaitable twin of :meth:`resolve`."""
        lit, explicit = self._lit(kind)
        return await lit.resolve_async(**{**kwargs, **explicit})

    def fetch_bodies(self, *, kind: str | None = None, **kwargs: Any) -> pd.DataFrame:
        """Fetch the bodies; see :meth:`LitFrameAccessor.fetch_bodies`."""
        lit, explicit = self._lit(kind)
        return lit.fetch_bodies(**{**kwargs, **explicit})

    async def fetch_bodies_async(self, *, kind: str | None = None, **kwargs: Any) -> pd.DataFrame:
        """Awaitable twin of :meth:`fetch_bodies`."""
        lit, explicit = self._lit(kind)
        return await lit.fetch_bodies_async(**{**kwargs, **explicit})

    def licences(self, *, kind: str | None = None, **kwargs: Any) -> pd.DataFrame:
        """Access terms per id; see :meth:`LitFrameAccessor.licences`."""
        lit, explicit = self._lit(kind)
        return lit.licences(**{**kwargs, **explicit})

    async def licences_async(self, *, kind: str | None = None, **kwargs: Any) -> pd.DataFrame:
        """Awaitable twin of :meth:`licences`."""
        lit, explicit = self._lit(kind)
        return await lit.licences_async(**{**kwargs, **explicit})

    def list_files(self, *, kind: str | None = None, **kwargs: Any) -> pd.DataFrame:
        """File-set per id; see :meth:`LitFrameAccessor.list_files`."""
        lit, explicit = self._lit(kind)
        return lit.list_files(**{**kwargs, **explicit})

    async def list_files_async(self, *, kind: str | None = None, **kwargs: Any) -> pd.DataFrame:
        """Awaitable twin of :meth:`list_files`."""
        lit, explicit = self._lit(kind)
        return await lit.list_files_async(**{**kwargs, **explicit})

    def files(self, *, kind: str | None = None, **kwargs: Any) -> pd.DataFrame:
        """Tidy file-set; see :meth:`LitFrameAccessor.files`."""
        lit, explicit = self._lit(kind)
        return lit.files(**{**kwargs, **explicit})

    async def files_async(self, *, kind: str | None = None, **kwargs: Any) -> pd.DataFrame:
        """Awaitable twin of :meth:`files`."""
        lit, explicit = self._lit(kind)
        return await lit.files_async(**{**kwargs, **explicit})

    def related(self, *, kind: str | None = None, **kwargs: Any) -> pd.DataFrame:
        """Preprint / published counterparts; see :meth:`LitFrameAccessor.related`."""
        lit, explicit = self._lit(kind)
        return lit.related(**{**kwargs, **explicit})

    async def related_async(self, *, kind: str | None = None, **kwargs: Any) -> pd.DataFrame:
        """Awaitable twin of :meth:`related`."""
        lit, explicit = self._lit(kind)
        return await lit.related_async(**{**kwargs, **explicit})

    def relations(self, *, kind: str | None = None, **kwargs: Any) -> pd.DataFrame:
        """Long-form relations; see :meth:`LitFrameAccessor.relations`."""
        lit, explicit = self._lit(kind)
        return lit.relations(**{**kwargs, **explicit})

    async def relations_async(self, *, kind: str | None = None, **kwargs: Any) -> pd.DataFrame:
        """Awaitable twin of :meth:`relations`."""
        lit, explicit = self._lit(kind)
        return await lit.relations_async(**{**kwargs, **explicit})
