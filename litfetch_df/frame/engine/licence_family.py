"""One comparable name for a licence, whatever form its source wrote it in.

The engine reports a licence raw, as its source gave it (litfetch-api.txt:
"mapping to an SPDX id is the consumer's job"): a Creative Commons URL from a
JATS ``<license xlink:href>``, ``cc-by`` from Unpaywall, ``CCBY`` from Europe
PMC, ``cc_by`` elsewhere, ``public-domain`` from a ``license-type``. A table
of thousands of articles needs one name per kind of licence to count and
filter by; :func:`licence_family` gives it, without inventing a version the
source did not state.
"""

from __future__ import annotations

import re
from typing import Final

__all__ = ["FAMILIES", "licence_family"]

FAMILIES: Final = (
    "cc-by",
    "cc-by-sa",
    "cc-by-nd",
    "cc-by-nc",
    "cc-by-nc-sa",
    "cc-by-nc-nd",
    "cc0",
    "public-domain",
    "other",
)
"""Every value :func:`licence_family` returns (besides ``None``)."""

_CC_URL = re.compile(r"creativecommons\.org/licen[cs]es/([a-z-]+)")
_CC_ZERO_URL = re.compile(r"creativecommons\.org/publicdomain/zero")
_PD_MARK_URL = re.compile(r"creativecommons\.org/publicdomain/mark")
_CC_SHORT = re.compile(r"^(?:cc|creative-?commons)-?((?:by|nc|sa|nd)(?:-?(?:by|nc|sa|nd))*)(?:-|$)")
_TERMS = ("by", "nc", "sa", "nd")
_CC0 = frozenset({"cc0", "cc-0", "cc-zero", "cczero"})
_PUBLIC_DOMAIN = frozenset({"public-domain", "publicdomain", "pd", "public-domain-mark"})


def licence_family(licence: str | None) -> str | None:
    """Return the family of a raw licence string, one of :data:`FAMILIES`, or ``None``.

    Creative Commons licences become ``cc-by``, ``cc-by-nc-nd`` … (terms in
    the canonical order, the version left out), CC0 ``cc0``, the Public
    Domain Mark and ``public-domain`` ``public-domain``; any other stated
    licence (a publisher's own, ``other-oa``, ``implied-oa``) is ``other``.
    ``None``, an empty string or a value that is not a string gives ``None``.
    """
    if not isinstance(licence, str):
        return None
    text = licence.strip().lower()
    if not text:
        return None
    if _CC_ZERO_URL.search(text):
        return "cc0"
    if _PD_MARK_URL.search(text):
        return "public-domain"
    url = _CC_URL.search(text)
    if url is not None:
        return _cc_family(url.group(1).split("-"))
    token = re.sub(r"[\s_]+", "-", text).removesuffix("-license").removesuffix("-licence")
    if token in _CC0 or token.startswith("cc0-"):
        return "cc0"
    if token in _PUBLIC_DOMAIN:
        return "public-domain"
    short = _CC_SHORT.match(token)
    if short is not None:
        terms = re.findall(r"by|nc|sa|nd", short.group(1))
        return _cc_family(terms)
    if "creative-commons" in token and "attribution" in token:
        # Spelled out: "Creative Commons Attribution-NonCommercial-NoDerivatives 4.0".
        words = {"attribution": "by", "noncommercial": "nc", "non-commercial": "nc"}
        words |= {"sharealike": "sa", "share-alike": "sa", "noderivatives": "nd"}
        words |= {"noderivs": "nd", "no-derivatives": "nd"}
        return _cc_family([t for w, t in words.items() if w in token])
    return "other"


def _cc_family(terms: list[str]) -> str:
    present = [t for t in _TERMS if t in terms]
    if "by" not in present or ("sa" in present and "nd" in present):
        return "other"  # not a licence Creative Commons publishes
    family = "cc-" + "-".join(present)
    return family if family in FAMILIES else "other"
