"""What a bulk lookup's service said about one id, kept in the persistent cache.

A bulk lookup (a Crossref list query, an OpenAlex works filter) answers about
many ids at once; its per-id answers are kept as records so a later run, or a
subset of the same table, reads them without asking again (ADR 0012). A record
lives in the response store under :func:`record_key`, which can never equal a
request's key, and is never kept when it echoes a credential.
"""

from __future__ import annotations

import hashlib
import json as jsonlib
from collections.abc import Sequence
from typing import Any
from urllib.parse import quote

from ..wire.http import get_logger
from .answers import CachedResponse, Recalled, ResponseStore

__all__ = ["RECORD_FORMAT", "keep_record", "recall_record", "record_key"]

# The session's logger name: the lines a user filters on did not move with the code.
log = get_logger("litfetch_df.session")

RECORD_FORMAT = 1
"""Version of the per-id record entries (see :func:`record_key`); part of every record key,
so a change of their encoding makes older entries misses instead of misreadings."""

# A per-id record's stored "URL": what it is, never which id or credential.
_RECORD_URL = "litfetch-record:"


def record_key(kind: str, key: str) -> str:
    """Return the cache key of a bulk lookup's per-id answer: a SHA-256 over its parts.

    ``kind`` names the lookup (service and what shapes its answer), ``key`` the
    id in the lookup's comparison form. The material differs in shape from
    :func:`~litfetch_df.store.primed.request_key`'s, so a record key never equals
    a request key.
    """
    material = jsonlib.dumps(["litfetch_df record", RECORD_FORMAT, kind, key])
    return hashlib.sha256(material.encode()).hexdigest()


def recall_record(store: ResponseStore, kind: str, key: str) -> Recalled | None:
    """Return the record ``store`` keeps about one id, or ``None`` when it keeps none."""
    entry = store.load(record_key(kind, key))
    if entry is None or not entry.url.startswith(_RECORD_URL):
        return None
    try:
        body = jsonlib.loads(entry.content)
    except ValueError:
        return None
    if not isinstance(body, dict) or "record" not in body:
        return None
    return Recalled(body["record"])


def keep_record(
    store: ResponseStore, kind: str, key: str, value: Any, *, secrets: Sequence[str] = ()
) -> None:
    """Keep what a lookup said about one id (``None``: no such id); never raise.

    ``value`` must be JSON-able; a record holding one of ``secrets`` (the
    credentials the batch request carried) is not kept: a scrubbed record would
    answer differently from the real one.
    """
    try:
        text = jsonlib.dumps({"record": value}, separators=(",", ":"), ensure_ascii=False)
    except (TypeError, ValueError):
        log.warning("not caching a per-id answer that is not JSON")
        return
    if any(
        form in text for secret in secrets if secret for form in (secret, quote(secret, safe=""))
    ):
        log.debug("not caching a per-id answer that echoes a credential")
        return
    entry = CachedResponse(
        status_code=200,
        headers=(("content-type", "application/json"),),
        content=text.encode(),
        url=_RECORD_URL + kind,
    )
    try:
        store.save(record_key(kind, key), entry, secrets=[s for s in secrets if s])
    except Exception as exc:  # a cache must never fail the lookup it serves
        log.warning("could not store a per-id answer in the cache: %s", type(exc).__name__)
