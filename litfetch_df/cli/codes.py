"""The command line's exit codes, its steps, and the one error it reports to the user."""

from __future__ import annotations

from typing import Final

from ..wire.http import redact_text

__all__ = [
    "EXIT_CACHE",
    "EXIT_COLUMNS",
    "EXIT_DECODE",
    "EXIT_ERROR",
    "EXIT_INPUT",
    "EXIT_INTERRUPTED",
    "EXIT_OK",
    "EXIT_OUTPUT",
    "EXIT_PIPE",
    "EXIT_USAGE",
    "PROG",
    "STEPS",
    "CliError",
    "one_line",
]

EXIT_OK: Final = 0
EXIT_ERROR: Final = 1
EXIT_USAGE: Final = 2
EXIT_INPUT: Final = 3
EXIT_DECODE: Final = 4
EXIT_COLUMNS: Final = 5
EXIT_OUTPUT: Final = 6
EXIT_CACHE: Final = 7
EXIT_INTERRUPTED: Final = 130
EXIT_PIPE: Final = 141

STEPS: Final[tuple[str, ...]] = ("resolve", "bodies", "files", "licences", "related")
"""The steps of ``run``, in the order they always run."""

PROG: Final = "litfetch-df"


class CliError(Exception):
    """A failure the user can act on: a one-line message and an exit code."""

    def __init__(self, code: int, message: str) -> None:
        super().__init__(message)
        self.code = code
        self.message = message


def one_line(text: str) -> str:
    """``text`` redacted and on one line, for a message on stderr."""
    return " ".join(redact_text(text).split())
