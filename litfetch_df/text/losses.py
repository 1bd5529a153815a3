"""Turning a renderer's loss counters into :class:`TextLoss` values."""

from __future__ import annotations

from .model import TextLoss
from .render import Renderer

__all__ = ["as_losses"]


def as_losses(renderer: Renderer) -> tuple[TextLoss, ...]:
    """Every element the renderer did not render, sorted by name."""
    return tuple(TextLoss(name, count, chars) for name, (count, chars) in renderer.losses().items())
