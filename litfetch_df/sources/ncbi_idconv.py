"""NCBI PMC ID Converter: cross-reference PMID, PMCID and DOI for articles in PMC.

One endpoint serves both faces: :class:`NcbiIdConverterResolver` asks about one
bundle (with an explicit ``idtype``), and :func:`convert` asks about up to
:data:`BATCH_CAP` ids in one auto-detecting request (used by the batch
resolver in :mod:`litfetch_df.operations.resolution`). Both read records
through the same :func:`record_ids` mapping.

The converter only knows articles that are in PMC: a PubMed-only PMID or DOI
comes back as an error record, which is a miss, never a failure.
"""

from __future__ import annotations

import dataclasses
import re
from collections.abc import Mapping, Sequence
from typing import Any, Final

from ..ids import RESOLVABLE, ArticleIds, doi_key, parse_doi, parse_pmcid, parse_pmid
from ..wire.http import Http, Rate, get_logger
from .bulk_recipe import chunk_answer
from .common import parsed_or_none

__all__ = [
    "BATCH_CAP",
    "IDCONV_URL",
    "RECORD_KIND",
    "NcbiIdConverterResolver",
    "batch_key",
    "check_tool",
    "convert",
    "item_key",
    "record_ids",
]

log = get_logger(__name__)

IDCONV_URL: Final = "https://pmc.ncbi.nlm.nih.gov/tools/idconv/api/v1/articles/"
"""The converter's documented base (the trailing slash is part of it)."""

BATCH_CAP: Final = 200
"""Most ids NCBI accepts in one request."""

RECORD_KIND: Final = "ncbi-idconv"
"""The name the converter's per-id answers are kept under in the persistent cache
(the ids found for a key; ``tool`` and contact do not change them)."""

_TOOL = re.compile(r"^\S+$")


def check_tool(tool: object) -> str:
    """Return ``tool`` if it is a usable NCBI tool name (non-empty, no whitespace), else raise."""
    if not isinstance(tool, str) or not _TOOL.match(tool):
        raise ValueError("tool must be a non-empty name without whitespace")
    return tool


def item_key(ids: ArticleIds) -> tuple[str, str] | None:
    """Return ``(id, idtype)`` for a single-id request: the first usable of pmid, pmcid, doi.

    Returns ``None`` when the bundle holds none of them in a valid form.
    """
    for idtype, parser in (("pmid", parse_pmid), ("pmcid", parse_pmcid), ("doi", parse_doi)):
        value = parsed_or_none(parser, getattr(ids, idtype))
        if value is not None:
            return value, idtype
    return None


def batch_key(ids: ArticleIds) -> str | None:
    """Return the batch key of a bundle: pmid, else ``PMC``-prefixed pmcid, else lower-cased doi.

    ``None`` when the bundle is already complete (nothing to ask) or has no
    usable id. Lower-casing the DOI makes repeats that differ only in case one key.
    """
    if ids.has(RESOLVABLE):
        return None
    found = item_key(ids)
    if found is None:
        return None
    value, idtype = found
    return doi_key(value) if idtype == "doi" else value


def record_ids(record: Mapping[str, Any]) -> ArticleIds | None:
    """Map one converter record to the ids it names, or ``None`` for an error record.

    The current endpoint sends the PMID as an integer; it is coerced to text.
    Values that do not parse are dropped rather than trusted.
    """
    if record.get("status") == "error":
        return None
    found = ArticleIds(
        pmid=parsed_or_none(parse_pmid, _text(record.get("pmid"))),
        pmcid=parsed_or_none(parse_pmcid, _text(record.get("pmcid"))),
        doi=parsed_or_none(parse_doi, _text(record.get("doi"))),
    )
    return None if found.is_empty() else found


def _text(value: object) -> str | None:
    if isinstance(value, bool):
        return None
    if isinstance(value, int):
        return str(value)
    if isinstance(value, str) and value.strip():
        return value
    return None


def _aliases(ids: ArticleIds) -> list[str]:
    """The comparison forms under which a record can be matched to a sent key."""
    return [value.lower() for value in (ids.pmid, ids.pmcid, ids.doi) if value is not None]


def _correlate(records: Sequence[Any], keys: Sequence[str]) -> dict[str, ArticleIds]:
    # Sent keys are canonical (digits, PMC<digits>, a DOI), so lower-casing gives
    # one comparison form for all three schemes without collisions between them.
    wanted = {key.lower(): key for key in keys}
    found: dict[str, ArticleIds] = {}
    for record in records:
        if not isinstance(record, Mapping):
            continue
        ids = record_ids(record)
        if ids is None:
            continue
        requested = _text(record.get("requested-id"))
        if requested is not None and requested.strip().lower() in wanted:
            targets = [wanted[requested.strip().lower()]]
        else:
            # No usable echo of what was sent: fall back to the ids the record names.
            targets = [wanted[a] for a in _aliases(ids) if a in wanted]
        for key in targets:
            found[key] = found[key].merge(ids) if key in found else ids
    return found


async def convert(
    http: Http,
    keys: Sequence[str],
    *,
    tool: str = "litfetch_df",
    idtype: str | None = None,
) -> dict[str, ArticleIds] | None:
    """Ask the converter about ``keys`` (canonical ids) in one request.

    Without ``idtype`` the service detects each id's scheme, so PMIDs,
    ``PMC``-prefixed PMCIDs and DOIs may share a request. Returns a mapping
    from each key that NCBI answered to the ids it found (absent keys are
    misses, and a definitive error such as a 400 or a non-JSON body gives an
    empty mapping), or ``None`` when the request was given up after every
    retry (a transport failure, or a 429/5xx that outlived the retries).
    """
    if not keys:
        return {}
    params: dict[str, str | int] = {"ids": ",".join(keys), "format": "json", "tool": tool}
    if idtype is not None:
        params["idtype"] = idtype
    contact = getattr(http, "contact", None)
    if contact:
        params["email"] = contact

    def read(body: Any) -> dict[str, ArticleIds] | None:
        records = body.get("records") if isinstance(body, Mapping) else None
        return _correlate(records, keys) if isinstance(records, list) else None

    what = f"NCBI ID Converter ({len(keys)} id{'s' if len(keys) != 1 else ''})"
    send = http.get(IDCONV_URL, params=params, rate=Rate.NCBI_UNKEYED)
    return await chunk_answer(send, what, read, logger=log)


@dataclasses.dataclass(frozen=True, kw_only=True)
class NcbiIdConverterResolver:
    """A resolver that cross-references one bundle's pmid / pmcid / doi via NCBI.

    Keys on the first usable of pmid, pmcid, doi and sends its ``idtype``;
    ``tool`` and the session contact (as ``email``) identify the caller, as
    NCBI asks. Always keyless, paced at :attr:`Rate.NCBI_UNKEYED`. Returns the
    bundle merged with what NCBI knows (never overwriting a known id); an
    unusable bundle, a miss or a failed request leaves it unchanged.
    """

    tool: str = "litfetch_df"

    def __post_init__(self) -> None:
        check_tool(self.tool)

    async def __call__(self, ids: ArticleIds, http: Http) -> ArticleIds:
        """Return ``ids`` enriched from the converter's record for its first usable id."""
        if ids.has(RESOLVABLE):
            return ids
        key = item_key(ids)
        if key is None:
            return ids
        value, idtype = key
        found = await convert(http, [value], tool=self.tool, idtype=idtype)
        if not found:
            return ids
        record = found.get(value)
        return ids if record is None else ids.merge(record)
