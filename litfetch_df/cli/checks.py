"""What the command line checks before any work: the input can be read, the outputs written,
the identifier columns found. Each failure is a :class:`~litfetch_df.cli.codes.CliError`
with the exit code it means."""

from __future__ import annotations

import argparse
import os
import tempfile
from pathlib import Path
from typing import Any

import pandas as pd

from ..frame.io.columns import CANONICAL, detect_id_columns
from ..frame.io.readers import read_table
from ..store.cache import FILE_NAME
from .codes import (
    EXIT_COLUMNS,
    EXIT_DECODE,
    EXIT_INPUT,
    EXIT_OUTPUT,
    EXIT_USAGE,
    CliError,
    one_line,
)
from .results import output_format

__all__ = [
    "check_output",
    "check_writable_dir",
    "format_of",
    "has_cache",
    "id_columns",
    "os_reason",
    "read_input",
]


def format_of(path: str | os.PathLike[str]) -> str:
    """The output format ``path``'s suffix names (``csv``, ``parquet``, ...); else exit 2."""
    try:
        return output_format(path)
    except ValueError as exc:
        raise CliError(EXIT_USAGE, str(exc)) from None


def has_cache(path: Path) -> bool:
    """Whether ``path`` is a response-cache file or a directory holding one."""
    return (path / FILE_NAME).is_file() if path.is_dir() else path.is_file()


def check_writable_dir(directory: Path, what: str) -> None:
    """Make ``directory`` if needed and prove a file can be written in it; an output error else."""
    try:
        directory.mkdir(parents=True, exist_ok=True)
        fd, probe = tempfile.mkstemp(prefix=".litfetch-df-probe-", dir=directory)
        os.close(fd)
        os.unlink(probe)
    except OSError as exc:
        raise CliError(EXIT_OUTPUT, f"cannot write {what} {directory}: {os_reason(exc)}") from None


def check_output(path: Path) -> None:
    """Check, before any work, that the result can be written to ``path`` in its format."""
    fmt = format_of(path)
    if path.is_dir():
        raise CliError(EXIT_OUTPUT, f"cannot write output {path}: it is a directory")
    if path.exists() and not os.access(path, os.W_OK):
        raise CliError(EXIT_OUTPUT, f"cannot write output {path}: permission denied")
    parent = path.parent if str(path.parent) else Path(".")
    if not parent.is_dir():
        # A typo in the path must not leave new directories behind.
        raise CliError(EXIT_OUTPUT, f"cannot write output {path}: no directory {parent}")
    check_writable_dir(parent, "into directory")
    if fmt == "parquet":
        try:
            import pyarrow  # noqa: F401
        except ImportError:
            raise CliError(
                EXIT_OUTPUT,
                "writing Parquet needs pyarrow: pip install 'litfetch_df[parquet]'",
            ) from None


def os_reason(exc: OSError) -> str:
    """The short reason of an OS error (``Permission denied``), without its path."""
    return exc.strerror or type(exc).__name__


def read_input(path: Path, encoding: str) -> pd.DataFrame:
    """Read the input table; a missing or undecodable file is the error its exit code says."""
    if path.is_dir():
        raise CliError(EXIT_INPUT, f"cannot read {path}: it is a directory")
    try:
        return read_table(path, encoding=encoding)
    except FileNotFoundError:
        raise CliError(EXIT_INPUT, f"cannot read {path}: no such file") from None
    except ImportError:
        raise CliError(
            EXIT_INPUT, f"cannot read {path}: Parquet needs pyarrow (pip install pyarrow)"
        ) from None
    except OSError as exc:
        raise CliError(EXIT_INPUT, f"cannot read {path}: {os_reason(exc)}") from None
    except UnicodeError:
        raise CliError(
            EXIT_DECODE, f"{path}: not valid {encoding} text; try e.g. --encoding latin-1"
        ) from None
    except (ValueError, pd.errors.ParserError) as exc:
        if isinstance(exc.__cause__, UnicodeError):
            raise CliError(
                EXIT_DECODE, one_line(str(exc)).replace("encoding=", "--encoding ")
            ) from None
        message = one_line(str(exc))
        unsupported = "cannot read" in message or "no suffix" in message or "Excel" in message
        code = EXIT_INPUT if unsupported else EXIT_DECODE
        raise CliError(code, message if str(path) in message else f"{path}: {message}") from None


def id_columns(frame: pd.DataFrame, args: argparse.Namespace, input_path: Path) -> dict[str, Any]:
    """The columns named with ``--<kind>-col``, checked with the frame's (exit 5 if none)."""
    explicit = {
        kind: getattr(args, f"{kind}_col")
        for kind in CANONICAL
        if getattr(args, f"{kind}_col") is not None
    }
    try:
        detect_id_columns(frame.columns, explicit)
    except KeyError as exc:
        message = exc.args[0] if exc.args else str(exc)
        raise CliError(EXIT_COLUMNS, f"{input_path}: {one_line(str(message))}") from None
    except ValueError as exc:
        hint = "name one with --doi-col / --pmid-col / --pmcid-col / --bookid-col"
        text = one_line(str(exc)).split(" Or name one:")[0]
        raise CliError(EXIT_COLUMNS, f"{input_path}: {text} ({hint})") from None
    return explicit
