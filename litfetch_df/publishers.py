"""Which publisher a DOI belongs to: the one place that knows publisher DOI prefixes.

A publisher API answers only for its own articles, so asking it about anyone
else's DOI costs a request that cannot be answered (and, under a quota, a
request that pushes the real ones towards a 429). The bundled Springer Nature
sources ask only about DOIs this module attributes to Springer Nature.

Two kinds of evidence, in order of weight:

1. a Crossref work record, when one is at hand: its ``member`` id, else its
   ``publisher`` name (the registrant of the DOI today, which follows a journal
   that changed hands);
2. the DOI prefix: the prefixes registered to the publisher's Crossref member
   records (member 297 Springer Science+Business Media and 339 Springer Nature /
   Nature Publishing Group; member 78 Elsevier).

A DOI this module does not attribute is :attr:`Publisher.OTHER`. The lists are
data, kept here only; a publisher that registers a new prefix needs one line.
"""

from __future__ import annotations

import enum
import re
from collections.abc import Mapping
from typing import Any, Final

__all__ = [
    "ELSEVIER_MEMBERS",
    "ELSEVIER_PREFIXES",
    "SPRINGER_NATURE_MEMBERS",
    "SPRINGER_NATURE_PREFIXES",
    "Publisher",
    "by_crossref",
    "by_prefix",
    "doi_prefix",
    "publisher_of",
]


class Publisher(enum.Enum):
    """A publisher whose own API the library can ask, or ``OTHER``."""

    SPRINGER_NATURE = "springer_nature"
    ELSEVIER = "elsevier"
    OTHER = "other"


SPRINGER_NATURE_PREFIXES: Final[frozenset[str]] = frozenset(
    {
        # Crossref member 297, Springer Science+Business Media (Springer, Kluwer,
        # BioMed Central, Humana, Psychonomic Society, EPJ ...).
        "10.1007",
        "10.1023",
        "10.1065",
        "10.1114",
        "10.1140",
        "10.1186",
        "10.1245",
        "10.1251",
        "10.1361",
        "10.1379",
        "10.1381",
        "10.1385",
        "10.1617",
        "10.3758",
        "10.3920",
        "10.4098",
        "10.4333",
        "10.5052",
        "10.5819",
        "10.5822",
        "10.7603",
        # Crossref member 339, Springer Nature (Nature Publishing Group, Palgrave Macmillan).
        "10.1013",
        "10.1038",
        "10.1057",
        "10.3858",
    }
)
"""DOI prefixes registered to Springer Nature's Crossref members (297 and 339)."""

ELSEVIER_PREFIXES: Final[frozenset[str]] = frozenset(
    {
        # Crossref member 78, Elsevier BV and its imprints (Academic Press, Saunders,
        # Churchill Livingstone, Mosby, Urban & Fischer, Doyma ...).
        "10.1006",
        "10.1016",
        "10.1053",
        "10.1054",
        "10.1067",
        "10.1078",
        "10.1157",
        "10.1197",
        "10.1205",
        "10.1240",
        "10.1367",
        "10.1383",
        "10.1529",
        "10.1533",
        "10.1580",
        "10.1602",
        "10.2353",
        "10.3182",
        "10.3816",
        "10.3921",
        "10.4065",
        "10.7811",
    }
)
"""DOI prefixes registered to Elsevier's Crossref member (78)."""

SPRINGER_NATURE_MEMBERS: Final[frozenset[str]] = frozenset({"297", "339"})
"""Crossref member ids of Springer Nature: Springer Science+Business Media, and Nature."""

ELSEVIER_MEMBERS: Final[frozenset[str]] = frozenset({"78"})
"""Crossref member id of Elsevier."""

_PREFIXES: Final[Mapping[Publisher, frozenset[str]]] = {
    Publisher.SPRINGER_NATURE: SPRINGER_NATURE_PREFIXES,
    Publisher.ELSEVIER: ELSEVIER_PREFIXES,
}
_MEMBERS: Final[Mapping[Publisher, frozenset[str]]] = {
    Publisher.SPRINGER_NATURE: SPRINGER_NATURE_MEMBERS,
    Publisher.ELSEVIER: ELSEVIER_MEMBERS,
}
# Registrant names as Crossref spells them ("Springer Science and Business Media LLC",
# "Springer Nature", "Nature Publishing Group", "BioMed Central", "Elsevier BV").
TAG_NAMES: Final[Mapping[Publisher, re.Pattern[str]]] = {
    Publisher.SPRINGER_NATURE: re.compile(
        r"\bspringer\b|\bnature publishing\b|\bbiomed central\b|\bpalgrave\b", re.IGNORECASE
    ),
    Publisher.ELSEVIER: re.compile(r"\belsevier\b", re.IGNORECASE),
}

_PREFIX = re.compile(r"\s*(10\.\d+(?:\.\d+)*)/")


def doi_prefix(doi: str) -> str | None:
    """Return the prefix of ``doi`` (``10.1007`` of ``10.1007/s1-x``), or ``None`` for a non-DOI."""
    match = _PREFIX.match(doi)
    return match.group(1) if match else None


def by_prefix(doi: str) -> Publisher:
    """Return the publisher ``doi``'s prefix is registered to; ``OTHER`` when it is neither."""
    prefix = doi_prefix(doi)
    for publisher, prefixes in _PREFIXES.items():
        if prefix in prefixes:
            return publisher
    return Publisher.OTHER


def by_crossref(record: Mapping[str, Any]) -> Publisher | None:
    """Return the publisher a Crossref work record names, or ``None`` when it names none.

    The ``member`` id decides when it is one of the known members; otherwise
    the ``publisher`` name does (Crossref spells it differently over the
    years). A record that names a member or publisher which is neither gives
    ``OTHER``.
    """
    member = record.get("member")
    member = str(member).strip() if isinstance(member, str | int) else None
    for publisher, members in _MEMBERS.items():
        if member in members:
            return publisher
    name = record.get("publisher")
    if isinstance(name, str):
        for publisher, pattern in TAG_NAMES.items():
            if pattern.search(name):
                return publisher
    if member or (isinstance(name, str) and name.strip()):
        return Publisher.OTHER
    return None


def publisher_of(doi: str, crossref: Mapping[str, Any] | None = None) -> Publisher:
    """Return who publishes ``doi``: what its Crossref record names, else what its prefix says."""
    if crossref is not None:
        named = by_crossref(crossref)
        if named is not None:
            return named
    return by_prefix(doi)
