"""Elsevier Article Retrieval API, located through the DOI's Crossref record.

Crossref doubles as the "is this an Elsevier article?" test: only a DOI whose
Crossref record links a ``text/xml`` rendition on an ``api.elsevier.com`` host
is ever sent to Elsevier, and the caller's key travels only there.
"""

from __future__ import annotations

import asyncio
import re
from collections.abc import Mapping
from typing import Any, Final

from ..files import ELSEVIER_XML, Blob, File, FileKind
from ..ids import ArticleIds
from ..metadata import is_open_licence_url
from ..safexml.parse import root_name, safe_root_name
from ..wire.http import Http, Rate, get_logger, redact_url
from .common import fetch_ok, usable_credential, web_url
from .crossref import crossref_licence, fetch_crossref_work

__all__ = [
    "RAW_TEXT_ONLY",
    "ElsevierFetcher",
    "elsevier_xml_link",
    "is_elsevier_api_url",
    "is_full_text",
    "is_raw_text_only",
]

log = get_logger(__name__)

_NAME: Final = "elsevier_oa"
_CREDENTIAL: Final = "elsevier_api_key"
_INSTTOKEN: Final = "elsevier_insttoken"
_API_HOST: Final = "api.elsevier.com"
_ROOT: Final = "full-text-retrieval-response"
# Older answers carry the article only as <xocs:rawtext>. An abstract runs to a
# couple of thousand characters; a raw text past this is the article itself.
_RAW_TEXT_MIN: Final = 6000
_RAW_TEXT = re.compile(rb"<xocs:rawtext\b[^>]*>(.*?)</xocs:rawtext\s*>", re.DOTALL)

RAW_TEXT_ONLY: Final = "Elsevier raw text: the article's full text without section structure"

ENTITLEMENT_PROBES: Final = 3
"""Closed articles asked, one at a time, before a fetcher concludes its key reaches none.

Elsevier decides entitlement from the key and the client's address: off an
entitled network a subscription article comes back as an abstract. A closed
article (no open licence deposited with Crossref) is asked only while the
fetcher does not know; once this many in a row came back without full text,
the others are not asked (absent), and one full text makes it ask them all.
An ``elsevier_insttoken`` credential says the key is entitled.
"""
"""``File.description`` of an Elsevier body that holds its text only as ``<xocs:rawtext>``."""


def is_elsevier_api_url(url: object) -> bool:
    """Return whether ``url`` is an ``https`` URL on ``api.elsevier.com`` (or a subdomain of it).

    This guards the API key: a URL failing it is never sent the key. Plain
    ``http`` is refused too, since the key would travel in clear text.
    """
    parsed = web_url(url)
    if parsed is None:
        return False
    host = parsed.host.lower()
    return (
        parsed.scheme == "https"
        and not parsed.userinfo
        and parsed.port is None
        and (host == _API_HOST or host.endswith("." + _API_HOST))
    )


def elsevier_xml_link(record: Mapping[str, Any]) -> str | None:
    """Return the first ``text/xml`` link of a Crossref work record that points at Elsevier's API.

    ``None`` when the record has no such link (the DOI is not Elsevier-hosted).
    """
    links = record.get("link")
    if not isinstance(links, list):
        return None
    for link in links:
        if not isinstance(link, dict) or link.get("content-type") != "text/xml":
            continue
        url = link.get("URL")
        if isinstance(url, str) and is_elsevier_api_url(url):
            return url.strip()
    return None


def is_full_text(content: bytes) -> bool:
    """Return whether an Elsevier response carries the article's full text.

    The root must be ``full-text-retrieval-response`` (so an HTML page or a
    ``service-error`` never counts), and the body must hold ``<ce:sections``
    or at least three ``<ce:para`` elements, or a substantial
    ``<xocs:rawtext>`` (:func:`is_raw_text_only`); an abstract-only answer
    (what a non-entitled network gets for a subscription article) has none.
    """
    if root_name(content) != _ROOT:
        return False
    # Kept as bytes, so it must parse safely here: no entity declarations, no absurd nesting.
    if safe_root_name(content) != _ROOT:
        return False
    return _has_structure(content) or _raw_text_length(content) >= _RAW_TEXT_MIN


def is_raw_text_only(content: bytes) -> bool:
    """Return whether an Elsevier full-text answer holds its text only as ``<xocs:rawtext>``.

    True when there are no structured sections (no ``<ce:sections``, fewer
    than three ``<ce:para``) but a raw text of at least 6,000 characters (as
    bytes); a short raw text is an abstract and does not count.
    """
    if root_name(content) != _ROOT or _has_structure(content):
        return False
    return _raw_text_length(content) >= _RAW_TEXT_MIN


def _has_structure(content: bytes) -> bool:
    return b"<ce:sections" in content or content.count(b"<ce:para") >= 3


def _raw_text_length(content: bytes) -> int:
    match = _RAW_TEXT.search(content)
    return len(match.group(1).strip()) if match else 0


class ElsevierFetcher:
    """Body fetcher ``elsevier_oa``: Elsevier full-text XML for a DOI.

    Needs ``credentials['elsevier_api_key']`` (a per-user dev.elsevier.com
    key); without one it declines and makes no request at all. An instance
    learns whether its key and network are entitled to subscription articles
    (see :data:`ENTITLEMENT_PROBES`); ``credentials['elsevier_insttoken']``
    says they are, and is sent as ``X-ELS-Insttoken``.
    """

    name: str = _NAME
    requires: frozenset[str] = frozenset({"doi"})

    def __init__(self) -> None:
        self._entitled: bool | None = None  # None: not known yet
        self._misses = 0
        self._probing: tuple[asyncio.AbstractEventLoop, asyncio.Lock] | None = None

    def __repr__(self) -> str:
        return "ElsevierFetcher()"

    @property
    def entitled(self) -> bool | None:
        """Whether this fetcher's key reaches subscription full text (``None``: not known)."""
        return self._entitled

    async def fetch(
        self,
        article_ids: ArticleIds,
        *,
        credentials: Mapping[str, object] | None = None,
        http: Http,
    ) -> Blob | None:
        """Return the full-text XML as an ``application/vnd.elsevier+xml`` Blob, or ``None``.

        Declines (``None``) without a key or DOI, when Crossref links no
        Elsevier XML, on any non-200, an empty or abstract-only body, a
        transport failure, and, without asking, for a closed article once the
        key is known not to reach closed articles.
        """
        key = usable_credential(credentials, _CREDENTIAL)
        if key is None or article_ids.doi is None:
            return None
        record = await fetch_crossref_work(http, article_ids.doi)
        if record is None:
            return None
        link = elsevier_xml_link(record)
        if link is None:
            log.debug("Crossref links no Elsevier XML for %s", article_ids.doi)
            return None
        headers = {"X-ELS-APIKey": key, "Accept": "text/xml"}
        token = usable_credential(credentials, _INSTTOKEN)
        if token is not None:
            headers["X-ELS-Insttoken"] = token
        if token is None and not _deposited_open(record):
            if self._entitled is False:
                log.debug("not entitled to closed Elsevier articles: %s not asked", article_ids.doi)
                return None
            if self._entitled is None:
                async with self._probe_lock():  # one closed article at a time until known
                    if self._entitled is None:
                        return await self._probe(http, link, headers, article_ids.doi)
                if self._entitled is False:
                    return None
        content = await self._full_text(http, link, headers, article_ids.doi)
        if not content:
            return None
        return _blob(link, content)

    def _probe_lock(self) -> asyncio.Lock:
        # One lock per event loop: an instance may serve several synchronous calls in turn.
        loop = asyncio.get_running_loop()
        if self._probing is None or self._probing[0] is not loop:
            self._probing = (loop, asyncio.Lock())
        return self._probing[1]

    async def _full_text(
        self, http: Http, link: str, headers: Mapping[str, str], doi: str
    ) -> bytes | None:
        """The full-text XML; ``b""`` for an answer without full text; ``None`` for no answer."""
        # Redirects stay off: the key header must not follow a hop to another origin.
        send = http.get(link, headers=headers, rate=Rate.ELSEVIER, follow_redirects=False)
        response = await fetch_ok(send, f"Elsevier request {redact_url(link)}", logger=log)
        if response is None:
            return None
        if not is_full_text(response.content):
            log.info("Elsevier returned no full text for %s", doi)
            return b""
        return response.content

    async def _probe(
        self, http: Http, link: str, headers: Mapping[str, str], doi: str
    ) -> Blob | None:
        """Ask for one closed article while entitlement is not known, and learn from it."""
        content = await self._full_text(http, link, headers, doi)
        if content is None:  # no answer: no evidence either way
            return None
        if content:
            self._entitled = True
            return _blob(link, content)
        self._misses += 1
        if self._misses >= ENTITLEMENT_PROBES:
            self._entitled = False
            log.info(
                "Elsevier gave no full text for %d closed articles: this key and network "
                "are not entitled; closed Elsevier articles are not asked further",
                self._misses,
            )
        return None


def _blob(link: str, content: bytes) -> Blob:
    # A raw-text-only body says so: it has the words but no sections.
    note = RAW_TEXT_ONLY if is_raw_text_only(content) else None
    file = File(FileKind.BODY, _NAME, media_type=ELSEVIER_XML, uri=link, description=note)
    return Blob(file=file, content=content)


def _deposited_open(record: Mapping[str, Any]) -> bool:
    """Whether the publisher deposited an open licence (CC, public domain) with Crossref."""
    licence = crossref_licence(record).licence
    return licence is not None and is_open_licence_url(licence)
