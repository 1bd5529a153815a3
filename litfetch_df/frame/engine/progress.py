"""A progress bar for frame runs: rows done, per-source counts and errors.

Uses ``tqdm.auto``, which draws a widget in Jupyter and text in a terminal.
By default (``enabled=None``) the bar appears only once a run has taken a
couple of seconds, so quick calls stay quiet; ``True`` shows it at once and
``False`` never.
"""

from __future__ import annotations

from collections import Counter
from typing import IO, Any, Final

__all__ = ["DEFAULT_DELAY", "Progress"]

DEFAULT_DELAY: Final = 2.0
"""Seconds a run must last before the default (``progress=None``) bar shows up."""


class Progress:
    """Counts finished rows and shows them on a tqdm bar (unless disabled).

    ``advance(rows, label=..., error=...)`` records that ``rows`` rows got
    their answer; ``label`` (e.g. the body source) is counted in the postfix,
    as are errors. Usable as a context manager; :meth:`close` is idempotent.
    """

    def __init__(
        self,
        total: int,
        *,
        desc: str,
        enabled: bool | None = None,
        file: IO[str] | None = None,
    ) -> None:
        self.total = total
        self.done = 0
        self.errors = 0
        self.labels: Counter[str] = Counter()
        self._bar: Any = None
        if enabled is False or total <= 0:
            return
        from tqdm.auto import tqdm

        self._bar = tqdm(
            total=total,
            desc=desc,
            unit="row",
            delay=0.0 if enabled else DEFAULT_DELAY,
            file=file,
            dynamic_ncols=True,
            leave=True,
        )

    def __enter__(self) -> Progress:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def postfix(self) -> dict[str, int]:
        """Return what the bar shows after the count: per-label counts, then errors."""
        shown = dict(self.labels.most_common(6))
        if self.errors:
            shown["errors"] = self.errors
        return shown

    def advance(self, rows: int, *, label: str | None = None, error: bool = False) -> None:
        """Record ``rows`` more rows done, optionally under ``label`` and as errors."""
        self.done += rows
        if label:
            self.labels[label] += rows
        if error:
            self.errors += rows
        if self._bar is not None:
            # As text: tqdm prints numbers in its short form (10000 as "1e+4").
            shown = {k: str(v) for k, v in self.postfix().items()}
            self._bar.set_postfix(shown, refresh=False)
            self._bar.update(rows)

    def close(self) -> None:
        """Finish the bar (leaving its last state visible)."""
        bar, self._bar = self._bar, None
        if bar is not None:
            bar.close()
