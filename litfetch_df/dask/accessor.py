"""``ddf.lit`` on Dask DataFrames and Series: the pandas accessor's methods, lazy.

Every method builds a Dask graph and returns a Dask DataFrame (``summary``
too); nothing is sent until it is computed. The result has the pandas
accessor's columns and dtypes (its ``meta`` is the pandas method's answer
on an empty frame), the input's index and row order, and unknown divisions.

On the way, rows are shuffled so that every row of one id bundle (or one
file URI, for ``fetch_files``) is worked in the same partition: a bundle
that appears in many partitions is fetched once. Each partition opens its own
:class:`~litfetch_df.Session`; the rate-limited hosts of all of them are paced
by one coordinator (:mod:`litfetch_df.dask.limiter`).

Keywords beyond the pandas accessor's:

* ``session_factory``: called on each worker as
  ``session_factory(limiter_factory=...)`` to build the partition's session
  (``Session`` or a ``functools.partial`` of it; a ``Session`` object cannot
  travel to another process, so ``session=`` is refused);
* ``coordinator``: ``'auto'`` (default: the ``distributed`` client's actor,
  else one coordinator per process), ``None`` (each session paces alone), or
  a :class:`~litfetch_df.dask.cluster.Coordinator`;
* ``coordinate_hosts``: the hosts that share one budget (default
  :data:`~litfetch_df.dask.limiter.COORDINATED_HOSTS`).
"""

from __future__ import annotations

import os
from collections.abc import Callable, Collection, Hashable
from typing import Any

import dask.dataframe as dd
import pandas as pd

from ..frame.engine.onepass import parse_steps
from ..frame.io.columns import CANONICAL, detect_id_columns, kind_of_name, sniff_kind
from ..frame.series_accessor import LitSeriesAccessor
from ..frame.summary import summarise
from ..session import Session
from . import parquet as pq
from . import partition as part
from .cluster import Coordinator, current_coordinator
from .limiter import COORDINATED_HOSTS

__all__ = ["DaskLitFrameAccessor", "DaskLitSeriesAccessor", "register"]

_HEAVY = ("body", "files", "related")  # never needed to count what a frame holds


def _coordinator(value: Any) -> Coordinator | None:
    if value == "auto":
        return current_coordinator()
    if value is None or isinstance(value, Coordinator):
        return value
    raise TypeError(f"coordinator must be 'auto', None or a Coordinator, not {value!r}")


class DaskLitFrameAccessor:
    """``ddf.lit``: the pandas ``df.lit`` methods on a Dask DataFrame, lazy."""

    def __init__(self, frame: dd.DataFrame) -> None:
        self._frame = frame

    def _apply(self, method: str, args: tuple[Any, ...], kwargs: dict[str, Any]) -> dd.DataFrame:
        if kwargs.get("session") is not None:
            raise TypeError(
                "a Session cannot travel to the workers; pass session_factory= (for example "
                "functools.partial(Session, contact=..., cache=...))"
            )
        kwargs.pop("session", None)
        factory: Callable[..., Session] | None = kwargs.pop("session_factory", None)
        coordinator = _coordinator(kwargs.pop("coordinator", "auto"))
        hosts: Collection[str] = kwargs.pop("coordinate_hosts", COORDINATED_HOSTS)
        frame: Any = self._frame  # dask's API is untyped
        explicit: dict[str, Hashable | None] = {k: kwargs[k] for k in CANONICAL if k in kwargs}
        by = "uri" if method == "fetch_files" and "uri" in frame.columns else "ids"
        if by == "ids":
            detect_id_columns(frame.columns, explicit)  # no id column fails here, not later
        plan = part.WorkPlan(method, args, kwargs, factory, coordinator, frozenset(hosts))
        empty = frame._meta
        meta = part.meta_of(empty, plan)
        tagged_meta = part.tag(empty, by, explicit)
        tagged = frame.map_partitions(part.tag, by, explicit, meta=tagged_meta)
        # Task-based shuffles: the P2P one converts partitions to Arrow, which cannot hold
        # the Blob, File and Related objects of the result columns.
        grouped = tagged.shuffle(on=part.KEY, npartitions=frame.npartitions, shuffle_method="tasks")
        out_meta = meta.copy()
        out_meta[part.ROW] = pd.Series(dtype="int64")
        out_meta[part.LABEL] = pd.Series(dtype=empty.index.dtype)
        out_meta = out_meta.reset_index(drop=True)
        worked = grouped.map_partitions(part.work, plan, meta=out_meta)
        back = worked.set_index(
            part.ROW, divisions=list(part.divisions(frame.npartitions)), shuffle_method="tasks"
        )
        result: dd.DataFrame = back.map_partitions(
            part.restore,
            empty.index.name,
            empty.index.dtype,
            meta=meta,
            clear_divisions=True,
        )
        return result

    # -- the methods of df.lit ---------------------------------------------------------------

    def resolve(self, **kwargs: Any) -> dd.DataFrame:
        """Lazy ``df.lit.resolve``: canonical ``pmid``, ``pmcid``, ``doi``, ``bookid``."""
        return self._apply("resolve", (), kwargs)

    def fetch_bodies(self, **kwargs: Any) -> dd.DataFrame:
        """Lazy ``df.lit.fetch_bodies``; ``out_dir``: a path every worker sees, or an fsspec URL."""
        return self._apply("fetch_bodies", (), kwargs)

    def list_files(self, **kwargs: Any) -> dd.DataFrame:
        """Lazy ``df.lit.list_files``: ``files``, ``n_files``, ``files_error``."""
        return self._apply("list_files", (), kwargs)

    def licences(self, **kwargs: Any) -> dd.DataFrame:
        """Lazy ``df.lit.licences``: licence, access, ``oa_status`` and their bases."""
        return self._apply("licences", (), kwargs)

    def related(self, **kwargs: Any) -> dd.DataFrame:
        """Lazy ``df.lit.related``: preprint and published counterparts."""
        return self._apply("related", (), kwargs)

    def run(self, steps: str | Collection[str] | None = None, **kwargs: Any) -> dd.DataFrame:
        """Lazy ``df.lit.run``: every asked step in one pass per bundle."""
        args: tuple[Any, ...] = () if steps is None else (parse_steps(steps),)
        return self._apply("run", args, kwargs)

    def files(self, **kwargs: Any) -> dd.DataFrame:
        """Lazy ``df.lit.files``: the long file-set, one row per file, under its row's label."""
        return self._apply("files", (), kwargs)

    def fetch_files(self, out_dir: str, **kwargs: Any) -> dd.DataFrame:
        """Lazy ``df.lit.fetch_files``: each file once, into ``out_dir`` (seen by every worker)."""
        return self._apply("fetch_files", (os.fspath(out_dir),), kwargs)

    def text(
        self, *, math: str = "tex", out_dir: str | os.PathLike[str] | None = None, **kwargs: Any
    ) -> dd.DataFrame:
        """Lazy ``df.lit.text``: the text columns; bodies fetched first when there are none."""
        from .text import text_frame

        return text_frame(self._frame, math=math, out_dir=out_dir, fetch=kwargs)

    def text_long(self, part: str, *, math: str = "tex", **kwargs: Any) -> dd.DataFrame:
        """Lazy ``df.lit.text_long``: one row per section, paragraph, reference, citation…"""
        from .text import long_frames

        return long_frames(self._frame, part, math=math, fetch=kwargs)

    def to_parquet(
        self, path: str | os.PathLike[str], *, compute: bool = True, **kwargs: Any
    ) -> Any:
        """Write the frame to the directory ``path`` (a path or fsspec URL), a file a partition.

        Each partition is encoded as ``df.lit.to_parquet`` encodes a frame, in
        ``part.00000.parquet``, ...; :func:`litfetch_df.dask.read_parquet` (or,
        for a local directory, ``litfetch_df.read_parquet``) reads it back.
        Returns the written locations (with ``compute=False``, a delayed that
        writes them). ``kwargs`` go to :func:`pyarrow.parquet.write_table`.
        """
        return pq.to_parquet(self._frame, path, compute=compute, **kwargs)

    def summary(self) -> dd.DataFrame:
        """Lazy ``df.lit.summary``: the counts over the whole table, as one partition."""
        frame: Any = self._frame
        light = [c for c in frame.columns if c not in _HEAVY]
        meta = summarise(frame._meta[light])
        result: dd.DataFrame = (
            frame[light].repartition(npartitions=1).map_partitions(summarise, meta=meta)
        )
        return result


class DaskLitSeriesAccessor:
    """``ds.lit``: the DataFrame methods for a Dask Series holding one id kind.

    The kind comes from ``kind=``, else the Series name, else the values of
    its first partition (read then, not lazily).
    """

    def __init__(self, series: dd.Series) -> None:
        self._series = series

    def kind(self, kind: str | None = None) -> str:
        """Return the id kind this Series holds; raises :class:`ValueError` when unclear."""
        if kind is not None:
            return LitSeriesAccessor(self._series._meta).kind(kind)
        name = self._series.name
        named = kind_of_name(name) if name is not None else None
        found = named or sniff_kind(self._series.head(500, npartitions=1).tolist())
        if found is None:
            raise ValueError(
                f"cannot tell which id kind Series {name!r} holds; pass "
                "kind='pmid' / 'pmcid' / 'doi' / 'bookid'"
            )
        return found

    def _lit(self, kind: str | None) -> tuple[DaskLitFrameAccessor, dict[str, Any]]:
        which = self.kind(kind)
        name = self._series.name
        label = name if name is not None else which
        if label in CANONICAL and label != which:
            label = which  # as the pandas accessor: the kind's own name, not another's
        return DaskLitFrameAccessor(self._series.to_frame(name=label)), {which: label}

    def _call(self, method: str, kind: str | None, *args: Any, **kwargs: Any) -> dd.DataFrame:
        lit, explicit = self._lit(kind)
        result: dd.DataFrame = getattr(lit, method)(*args, **{**kwargs, **explicit})
        return result

    def resolve(self, *, kind: str | None = None, **kwargs: Any) -> dd.DataFrame:
        """Lazy ``s.lit.resolve``."""
        return self._call("resolve", kind, **kwargs)

    def fetch_bodies(self, *, kind: str | None = None, **kwargs: Any) -> dd.DataFrame:
        """Lazy ``s.lit.fetch_bodies``."""
        return self._call("fetch_bodies", kind, **kwargs)

    def list_files(self, *, kind: str | None = None, **kwargs: Any) -> dd.DataFrame:
        """Lazy ``s.lit.list_files``."""
        return self._call("list_files", kind, **kwargs)

    def licences(self, *, kind: str | None = None, **kwargs: Any) -> dd.DataFrame:
        """Lazy ``s.lit.licences``."""
        return self._call("licences", kind, **kwargs)

    def related(self, *, kind: str | None = None, **kwargs: Any) -> dd.DataFrame:
        """Lazy ``s.lit.related``."""
        return self._call("related", kind, **kwargs)

    def run(
        self, steps: str | Collection[str] | None = None, *, kind: str | None = None, **kwargs: Any
    ) -> dd.DataFrame:
        """Lazy ``s.lit.run``."""
        return self._call("run", kind, steps, **kwargs)

    def files(self, *, kind: str | None = None, **kwargs: Any) -> dd.DataFrame:
        """Lazy ``s.lit.files``."""
        return self._call("files", kind, **kwargs)


def _ours(current: object, cls: type) -> bool:
    return isinstance(current, type) and (current.__module__, current.__qualname__) == (
        cls.__module__,
        cls.__qualname__,
    )


def register() -> None:
    """Register ``lit`` on Dask DataFrame and Series (idempotent)."""
    from dask.dataframe import extensions

    ext: Any = extensions  # untyped
    if not _ours(getattr(dd.DataFrame, "lit", None), DaskLitFrameAccessor):
        ext.register_dataframe_accessor("lit")(DaskLitFrameAccessor)
    if not _ours(getattr(dd.Series, "lit", None), DaskLitSeriesAccessor):
        ext.register_series_accessor("lit")(DaskLitSeriesAccessor)
