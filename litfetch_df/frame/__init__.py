"""The DataFrame face: the ``.lit`` accessors and what they are built from.

Importing this package registers ``lit`` on :class:`pandas.DataFrame` and
:class:`pandas.Series`. This is the only layer that imports pandas.
"""

from __future__ import annotations

from .accessor import LitFrameAccessor
from .engine import options
from .engine.bridge import Interrupted
from .engine.options import Options, get_options, option_context, reset_options, set_options
from .io.columns import IdColumns, detect_id_columns
from .registration import register
from .series_accessor import LitSeriesAccessor
from .summary import summarise

__all__ = [
    "IdColumns",
    "Interrupted",
    "LitFrameAccessor",
    "LitSeriesAccessor",
    "Options",
    "detect_id_columns",
    "get_options",
    "option_context",
    "options",
    "register",
    "reset_options",
    "set_options",
    "summarise",
]

register()
