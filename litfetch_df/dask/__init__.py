"""``ddf.lit`` on Dask DataFrames and Series (the optional extra ``litfetch_df[dask]``).

Importing this package registers the accessor::

    import litfetch_df.dask  # noqa: F401  (registers ddf.lit)

The core package never imports it, nor dask. See docs/dask.md.
"""

from __future__ import annotations

from .accessor import DaskLitFrameAccessor, DaskLitSeriesAccessor, register
from .cluster import Coordinator, cluster_limiter
from .limiter import COORDINATED_HOSTS, ClusterHostLimiter, ClusterLimiter
from .parquet import read_parquet

__all__ = [
    "COORDINATED_HOSTS",
    "ClusterHostLimiter",
    "ClusterLimiter",
    "Coordinator",
    "DaskLitFrameAccessor",
    "DaskLitSeriesAccessor",
    "cluster_limiter",
    "read_parquet",
    "register",
]

register()
