"""Short per-row error texts: the reason, the host, the row's own id; no request URLs.

A failure recorded by the session names the request it gave up on (``not in
cache: GET https://api.crossref.org/works?filter=doi:…``). In a frame that
URL is noise, and for a batch request it names other rows' identifiers. The
error columns therefore hold the reason with each URL cut down to its host,
and an abandoned row's text ends with the row's own id::

    abandoned: not in cache: api.crossref.org [doi 10.1186/1471-2180-11-174]

The full text, URL included, goes to the ``litfetch_df`` log at DEBUG level.
"""

from __future__ import annotations

import re
from typing import Final
from urllib.parse import urlsplit

from ...ids import FIELDS, ArticleIds
from ...wire.http import get_logger

__all__ = ["compact", "row_error", "untagged"]

log = get_logger(__name__)

_URL: Final = re.compile(r"(?:\b(?:GET|POST|HEAD|PUT|DELETE|PATCH)\s+)?(https?://[^\s)\]]+)")
_SEEN: Final = "\x00"
_ID_TAG: Final = re.compile(r"\s*\[(?:pmid|pmcid|doi|bookid) [^\]]*\]$")


def compact(text: str) -> str:
    """Return ``text`` with each request (``GET https://host/…``) replaced by its host.

    A host named again later in the text is dropped there, with the ``": "``
    before it. Text without a URL comes back unchanged.
    """
    if "://" not in text:
        return text
    seen: set[str] = set()

    def host(match: re.Match[str]) -> str:
        try:
            name = urlsplit(match.group(1)).hostname or "?"
        except ValueError:
            name = "?"
        if name in seen:
            return _SEEN
        seen.add(name)
        return name

    out = _URL.sub(host, text)
    out = re.sub(rf":?\s*{_SEEN}", "", out)
    if out != text:
        log.debug("in full: %s", text)
    return out


def _own_id(ids: ArticleIds) -> str | None:
    for kind in FIELDS:
        value = getattr(ids, kind)
        if value:
            return f"{kind} {value}"
    return None


def row_error(error: str | None, ids: ArticleIds) -> str | None:
    """Return a unit's error as the row shows it: compacted, and tagged with the row's id.

    Only abandoned and partial errors (retried on a re-run) get the
    ``[kind id]`` tag; an error already tagged is re-tagged, not tagged twice.
    """
    if error is None:
        return None
    text = compact(error)
    if not text.startswith(("abandoned", "partial")):
        return text
    shown = _own_id(ids)
    text = _ID_TAG.sub("", text)
    return f"{text} [{shown}]" if shown else text


def untagged(error: str) -> str:
    """Return ``error`` without the row-id tag :func:`row_error` adds."""
    return _ID_TAG.sub("", error)
