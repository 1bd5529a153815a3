"""What a run asked, per host, beside what its plan said it would ask.

``run()`` prices its own table with :func:`litfetch_df.frame.engine.cost.plan_costs`
before it starts and counts the requests its session put on the wire while it
worked; both go into ``attrs`` (:data:`REQUESTS_ATTR`) as plain ``{host: n}``
dicts, so a saved frame keeps them and :func:`litfetch_df.frame.summary.summarise`
can show them. The count is the session's own (every attempt, retries included),
so a session shared with another call at the same time counts that call's too.
"""

from __future__ import annotations

from collections.abc import Hashable, Mapping
from typing import Any, Final

import pandas as pd

__all__ = ["REQUESTS_ATTR", "planned_by_host", "record_requests", "requests_table", "sent_since"]

REQUESTS_ATTR: Final = "litfetch_df_requests"
"""The ``DataFrame.attrs`` entry: ``{"planned": {host: n}, "sent": {host: n}}``."""


def planned_by_host(plan: pd.DataFrame) -> dict[str, int]:
    """The requests a plan (``plan_costs``' frame) expects per host, its kinds summed.

    A kind with a quota counts at most what is left of it (the rest is deferred).
    """
    if plan.empty:
        return {}
    out: dict[str, int] = {}
    for r in plan.to_dict("records"):
        n = int(r["requests"])
        left = r["quota_left"]
        if not pd.isna(left):
            n = min(n, int(left))  # a spent quota sends no more than is left
        out[str(r["host"])] = out.get(str(r["host"]), 0) + n
    return {host: n for host, n in out.items() if n > 0}


def sent_since(before: Mapping[str, int], after: Mapping[str, int]) -> dict[str, int]:
    """The requests per host counted between two snapshots of a session's counters."""
    out = {host: n - before.get(host, 0) for host, n in after.items()}
    return {host: n for host, n in sorted(out.items()) if n > 0}


def record_requests(
    frame: pd.DataFrame, planned: Mapping[str, int], sent: Mapping[str, int]
) -> pd.DataFrame:
    """Put ``planned`` and ``sent`` (``{host: n}``) in ``frame.attrs``; return ``frame``."""
    entry = {"planned": dict(sorted(planned.items())), "sent": dict(sorted(sent.items()))}
    frame.attrs = {**frame.attrs, REQUESTS_ATTR: entry}
    return frame


def requests_table(attrs: Mapping[Hashable, Any]) -> pd.DataFrame:
    """One row per host of ``attrs``' record: ``planned``, ``sent`` (Int64), ``sent / planned``.

    Empty (same columns) when the frame holds no record, i.e. it was not made by ``run()``.
    A host the plan did not expect has ``planned`` 0 and no ratio.
    """
    entry = attrs.get(REQUESTS_ATTR)
    columns = ["host", "planned", "sent", "sent_over_planned"]
    if not isinstance(entry, Mapping):
        return pd.DataFrame(columns=columns)
    planned = dict(entry.get("planned") or {})
    sent = dict(entry.get("sent") or {})
    hosts = sorted(set(planned) | set(sent))
    rows = [
        {
            "host": host,
            "planned": int(planned.get(host, 0)),
            "sent": int(sent.get(host, 0)),
            "sent_over_planned": (
                round(sent.get(host, 0) / planned[host], 3) if planned.get(host) else None
            ),
        }
        for host in hosts
    ]
    out = pd.DataFrame(rows, columns=columns)
    return out.astype({"planned": "Int64", "sent": "Int64", "sent_over_planned": "Float64"})
