"""Registering the ``.lit`` accessors on pandas, once, also across module reloads."""

from __future__ import annotations

import pandas as pd

from .accessor import LitFrameAccessor
from .series_accessor import LitSeriesAccessor

__all__ = ["register"]


def _ours(current: object, cls: type) -> bool:
    # A reload makes a new class object; compare by qualified name, not identity.
    return isinstance(current, type) and (current.__module__, current.__qualname__) == (
        cls.__module__,
        cls.__qualname__,
    )


def register() -> None:
    """Register ``lit`` on DataFrame and Series (idempotent, also across module reloads)."""
    if not _ours(getattr(pd.DataFrame, "lit", None), LitFrameAccessor):
        pd.api.extensions.register_dataframe_accessor("lit")(LitFrameAccessor)
    if not _ours(getattr(pd.Series, "lit", None), LitSeriesAccessor):
        pd.api.extensions.register_series_accessor("lit")(LitSeriesAccessor)
