"""Tell a file's URL from a page about the article: :func:`is_landing_page`.

Services that point at "the open-access copy" sometimes give a DOI resolver
link or the article's landing page where a PDF is expected (Semantic
Scholar's ``openAccessPdf.url`` is ``https://doi.org/<doi>`` for some hybrid
and gold articles). Such a URL downloads HTML, not the file it claims to be.
"""

from __future__ import annotations

import re
from typing import Final

import httpx

__all__ = ["is_landing_page"]

# Hosts whose every URL resolves an identifier to the publisher's landing page.
_RESOLVERS: Final = frozenset(
    {"doi.org", "dx.doi.org", "www.doi.org", "hdl.handle.net", "identifiers.org", "n2t.net"}
)
# PMC and Europe PMC article pages (a PDF there has a /pdf/ path or a .pdf name).
_ARTICLE_PAGES: Final = (
    (
        re.compile(r"^(?:www\.)?ncbi\.nlm\.nih\.gov$"),
        re.compile(r"^/pmc/articles/(?:PMC)?\d+/?$", re.I),
    ),
    (re.compile(r"^pmc\.ncbi\.nlm\.nih\.gov$"), re.compile(r"^/articles/(?:PMC)?\d+/?$", re.I)),
    (
        re.compile(r"^(?:www\.)?europepmc\.org$"),
        re.compile(r"^/(?:article/[A-Z]+/[\w.]+|abstract/[A-Z]+/\w+)/?$", re.I),
    ),
)


def is_landing_page(url: str) -> bool:
    """Return whether ``url`` is a DOI / handle resolver link or a known article landing page.

    Resolver hosts (``doi.org``, ``dx.doi.org``, ``hdl.handle.net`` …) always
    count; PMC and Europe PMC count for their article pages, not for their PDF
    paths. A URL that does not parse counts as not a landing page.
    """
    try:
        parsed = httpx.URL(url.strip())
    except (httpx.InvalidURL, TypeError):
        return False
    host = parsed.host.lower()
    if host in _RESOLVERS:
        return True
    return any(h.match(host) and p.match(parsed.path) for h, p in _ARTICLE_PAGES)
