"""The pandas side of ``ddf.lit``: what runs on each partition, and the keys that order it.

A call goes through three per-partition functions (the Dask side in
:mod:`litfetch_df.dask.accessor` wires them with a shuffle between each):

1. :func:`tag` gives every row its place (:data:`ROW`: the partition number
   and the position in it), keeps its index label (:data:`LABEL`) and its
   dedup key (:data:`KEY`: the row's id bundle, or a file's URI);
2. after the rows are shuffled on :data:`KEY`, so that every row of a bundle
   sits in one partition, :func:`work` runs the pandas accessor there, in a
   session whose rate-limited hosts ask the cluster's coordinator;
3. after a shuffle back on :data:`ROW`, :func:`restore` puts the input's
   index back and drops the helper columns.
"""

from __future__ import annotations

from collections.abc import Callable, Collection, Hashable, Mapping
from dataclasses import dataclass, field
from typing import Any, Final

import numpy as np
import pandas as pd

from ..frame.accessor import LitFrameAccessor
from ..frame.engine.options import effective
from ..frame.io.columns import bundle_key, detect_id_columns, parse_rows
from ..session import Session
from .cluster import Coordinator, link_for
from .limiter import COORDINATED_HOSTS, limiter_factory

__all__ = [
    "KEY",
    "LABEL",
    "ROW",
    "SESSION_LEVEL",
    "WorkPlan",
    "divisions",
    "meta_of",
    "restore",
    "tag",
    "work",
]

ROW: Final = "__litfetch_row"
"""Helper column: a row's place in the input, ``partition << 40 | position << 16 | k``."""
LABEL: Final = "__litfetch_label"
"""Helper column: a row's index label in the input."""
KEY: Final = "__litfetch_key"
"""Helper column: what duplicates share (the id bundle, or a file's URI)."""

_PART_SHIFT: Final = 40
_ROW_SHIFT: Final = 16
_MAX_ROWS: Final = 1 << (_PART_SHIFT - _ROW_SHIFT)
_MAX_FANOUT: Final = 1 << _ROW_SHIFT

SESSION_LEVEL: Final = ("contact", "cache", "offline", "timeout", "allow_private_network")
"""Keywords that configure the session each partition opens, not the step."""


def divisions(npartitions: int) -> tuple[int, ...]:
    """Return the :data:`ROW` divisions that send each row back to its input partition."""
    starts = [i << _PART_SHIFT for i in range(npartitions)]
    return (*starts, (npartitions << _PART_SHIFT) - 1)


def _bundle_text(frame: pd.DataFrame, explicit: Mapping[str, Hashable | None]) -> list[str]:
    parsed = parse_rows(frame, detect_id_columns(frame.columns, explicit))
    keys = []
    for ids in parsed.bundles:
        key = bundle_key(ids)
        keys.append("|".join(v or "" for v in (key.pmid, key.pmcid, key.doi, key.bookid)))
    return keys


def tag(
    frame: pd.DataFrame,
    by: str,
    explicit: Mapping[str, Hashable | None],
    partition_info: Mapping[str, Any] | None = None,
) -> pd.DataFrame:
    """Return ``frame`` with :data:`ROW`, :data:`LABEL` and :data:`KEY` and a plain index.

    ``by`` is ``'ids'`` (key: the row's normalised id bundle) or ``'uri'``
    (key: the file URI of a long file-set frame).
    """
    number = int(partition_info["number"]) if partition_info else 0
    if len(frame) >= _MAX_ROWS:
        raise ValueError(f"a partition holds {len(frame)} rows; repartition below {_MAX_ROWS}")
    out = frame.copy()
    out[ROW] = (number << _PART_SHIFT) + (np.arange(len(frame), dtype="int64") << _ROW_SHIFT)
    out[LABEL] = frame.index
    if by == "uri":
        out[KEY] = frame["uri"].astype(object).map(str).to_numpy()
    else:
        out[KEY] = np.asarray(_bundle_text(frame, explicit), dtype=object)
    return out.reset_index(drop=True)


@dataclass(frozen=True, slots=True)
class WorkPlan:
    """What every partition of one call needs: the method, its arguments, the session.

    ``session_factory`` is called as ``session_factory(limiter_factory=...)``
    (plus the call's ``contact``/``cache``/``offline``/``timeout`` where
    given) and returns a Session that is not entered (``Session`` itself, or
    a ``functools.partial`` of it); without it, each partition opens a
    ``Session`` from the call's ``contact``/``cache``/``offline``/``timeout``
    and the package options of the process it runs in. ``coordinator`` is who
    paces the rate-limited hosts (``None``: each session alone).
    """

    method: str
    args: tuple[Any, ...] = ()
    kwargs: Mapping[str, Any] = field(default_factory=dict)
    session_factory: Callable[..., Session] | None = None
    coordinator: Coordinator | None = None
    hosts: Collection[str] = COORDINATED_HOSTS

    def session(self) -> Session:
        """Return a new, unopened session for one partition, paced as this plan says."""
        factory = None
        if self.coordinator is not None:
            factory = limiter_factory(link_for(self.coordinator), self.hosts)
        if self.session_factory is not None:
            given = {k: self.kwargs[k] for k in SESSION_LEVEL if self.kwargs.get(k) is not None}
            return self.session_factory(limiter_factory=factory, **given)
        opts = effective(**{k: self.kwargs[k] for k in SESSION_LEVEL if k in self.kwargs})
        return Session(
            contact=opts.contact,
            cache=opts.cache,
            offline=opts.offline,
            timeout=opts.timeout,
            limiter_factory=factory,
            allow_private_network=opts.allow_private_network,
        )

    def step_kwargs(self) -> dict[str, Any]:
        """Return the keywords for the pandas method, without the session-level ones."""
        return {k: v for k, v in self.kwargs.items() if k not in SESSION_LEVEL}


def _call(frame: pd.DataFrame, plan: WorkPlan, kwargs: Mapping[str, Any]) -> pd.DataFrame:
    method = getattr(LitFrameAccessor(frame), plan.method)
    result: pd.DataFrame = method(*plan.args, **kwargs)
    return result


def meta_of(meta: pd.DataFrame, plan: WorkPlan) -> pd.DataFrame:
    """Return the pandas method's result on the empty frame ``meta`` (it sends no request)."""
    kwargs = {**plan.kwargs, "progress": False}
    return _call(meta.iloc[:0], plan, kwargs)


def work(frame: pd.DataFrame, plan: WorkPlan) -> pd.DataFrame:
    """Run the pandas method on one shuffled partition; keep each output row's place.

    ``frame`` carries the helper columns of :func:`tag`. The method sees the
    input's columns only; each output row gets the :data:`ROW` of the input
    row it came from (plus its rank among that row's outputs, for the long
    file-set frame) and that row's :data:`LABEL`.
    """
    rows = frame[ROW].to_numpy()
    labels = pd.Series(frame[LABEL].to_numpy(), index=rows)
    body = frame.drop(columns=[ROW, LABEL, KEY])
    body.index = pd.Index(rows, name=None)
    kwargs = {**plan.step_kwargs(), "progress": plan.kwargs.get("progress", False)}
    kwargs["session"] = plan.session()
    out = _call(body, plan, kwargs)
    rank = out.groupby(level=0, sort=False).cumcount().to_numpy()
    if len(rank) and int(rank.max()) >= _MAX_FANOUT:
        raise ValueError(f"a row gave more than {_MAX_FANOUT} output rows")
    place = out.index.to_numpy(dtype="int64")
    out = out.copy()
    out[ROW] = place + rank
    out[LABEL] = labels.reindex(place).to_numpy()
    return out.reset_index(drop=True)


def restore(frame: pd.DataFrame, name: Hashable | None, dtype: Any) -> pd.DataFrame:
    """Put the input's index back (from :data:`LABEL`, in :data:`ROW` order); drop helpers."""
    if ROW in frame.columns:
        frame = frame.sort_values(ROW, kind="stable").drop(columns=[ROW])
    else:  # the shuffle back made ROW the index
        frame = frame.sort_index(kind="stable")
    index = pd.Index(frame[LABEL].to_numpy(), name=name)
    if dtype is not None:
        index = index.astype(dtype)
    out = frame.drop(columns=[LABEL])
    out.index = index
    return out
