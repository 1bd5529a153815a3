"""The ``litfetch-df`` command line (``app``), its ``text`` command and its result writers."""

from __future__ import annotations

from .app import main

__all__ = ["main"]
