"""``litfetch-df cache info DIR`` / ``cache clear DIR``: inspect or empty a response cache."""

from __future__ import annotations

import argparse
import datetime as dt
from pathlib import Path
from typing import IO

from ..store.cache import FILE_NAME, ResponseCache
from .codes import EXIT_CACHE, EXIT_OK, CliError, one_line

__all__ = ["command_cache"]


def _cache_file(directory: str) -> Path:
    path = Path(directory).expanduser()
    target = path / FILE_NAME if path.is_dir() else path
    if not target.is_file():
        raise CliError(EXIT_CACHE, f"no response cache at {path}")
    return target


def _size(n: int) -> str:
    size = float(n)
    for unit in ("bytes", "KB", "MB", "GB"):
        if size < 1024 or unit == "GB":
            return f"{size:.0f} {unit}" if unit == "bytes" else f"{size:.1f} {unit}"
        size /= 1024
    return f"{n} bytes"  # pragma: no cover


def _when(stamp: dt.datetime | None) -> str:
    return stamp.strftime("%Y-%m-%d %H:%M UTC") if stamp is not None else "-"


def _open_existing(directory: str, ttl_days: float | None, *, read_only: bool) -> ResponseCache:
    target = _cache_file(directory)
    try:
        ttl = ttl_days * 86400.0 if ttl_days else None
        return ResponseCache(target, ttl=ttl, read_only=read_only)
    except (ValueError, OSError) as exc:
        raise CliError(EXIT_CACHE, f"cannot use cache {directory}: {one_line(str(exc))}") from None


def command_cache(args: argparse.Namespace, out: IO[str]) -> int:
    """Run ``cache info`` or ``cache clear`` on the directory named; return the exit code."""
    # Looking changes nothing: info opens the file read-only.
    cache = _open_existing(args.dir, args.ttl, read_only=args.cache_command == "info")
    try:
        if args.cache_command == "info":
            info = cache.info()
            days = info.ttl / 86400.0
            out.write(
                f"cache:    {info.path}\n"
                f"entries:  {info.entries} ({info.expired} expired under a {days:g}-day TTL)\n"
                f"size:     {_size(info.bytes)}\n"
                f"stored:   {_when(info.oldest)} to {_when(info.newest)}\n"
            )
            return EXIT_OK
        removed = cache.clear(expired_only=args.expired)
        what = "expired entries" if args.expired else "entries"
        out.write(f"removed {removed} {what} from {cache.path}\n")
        return EXIT_OK
    finally:
        cache.close()
