"""Elsevier Article Retrieval API, located through the DOI's Crossref record.

Crossref doubles as the "is this an Elsevier article?" test: only a DOI whose
Crossref record links a ``text/xml`` rendition on an ``api.elsevier.com`` host
is ever sent to Elsevier, and the caller's key travels only there.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any, Final

from .._http import Http, Rate, get_logger, redact_url
from .._xml import root_name, safe_root_name
from ..files import ELSEVIER_XML, Blob, File, FileKind
from ..ids import ArticleIds
from ._common import fetch_ok, usable_credential, web_url
from .crossref import fetch_crossref_work

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
_API_HOST: Final = "api.elsevier.com"
_ROOT: Final = "full-text-retrieval-response"
# Older answers carry the article only as <xocs:rawtext>. An abstract runs to a
# couple of thousand characters; a raw text past this is the article itself.
_RAW_TEXT_MIN: Final = 6000
_RAW_TEXT = re.compile(rb"<xocs:rawtext\b[^>]*>(.*?)</xocs:rawtext\s*>", re.DOTALL)

RAW_TEXT_ONLY: Final = "Elsevier raw text: the article's full text without section structure"
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
    key); without one it declines and makes no request at all.
    """

    name: str = _NAME
    requires: frozenset[str] = frozenset({"doi"})

    def __repr__(self) -> str:
        return "ElsevierFetcher()"

    async def fetch(
        self,
        article_ids: ArticleIds,
        *,
        credentials: Mapping[str, object] | None = None,
        http: Http,
    ) -> Blob | None:
        """Return the full-text XML as an ``application/vnd.elsevier+xml`` Blob, or ``None``.

        Declines (``None``) without a key or DOI, when Crossref links no
        Elsevier XML, on any non-200, an empty or abstract-only body, and a
        transport failure.
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
        # Redirects stay off: the key header must not follow a hop to another origin.
        send = http.get(
            link,
            headers={"X-ELS-APIKey": key, "Accept": "text/xml"},
            rate=Rate.DEFAULT,
            follow_redirects=False,
        )
        response = await fetch_ok(send, f"Elsevier request {redact_url(link)}", logger=log)
        if response is None:
            return None
        content = response.content
        if not is_full_text(content):
            log.info("Elsevier returned no full text for %s", article_ids.doi)
            return None
        # A raw-text-only body says so: it has the words but no sections.
        note = RAW_TEXT_ONLY if is_raw_text_only(content) else None
        file = File(FileKind.BODY, _NAME, media_type=ELSEVIER_XML, uri=link, description=note)
        return Blob(file=file, content=content)
