"""What a run whose quotas ran out found, row by row, against the same world with none spent.

Issue 24 asks that a run whose Unpaywall day and OpenAlex list budget are spent
still ends with every correctness figure at 0.99 or more, "from the services
that still answer". ``make bench-quota`` therefore runs the same corpus twice,
quotas spent and unspent, and compares each fact column row by row:

- **reference**: rows the unspent run filled;
- **found**: of those, rows the spent run filled too (from whichever service:
  a licence read from Crossref instead of Unpaywall counts);
- **deferred, only a spent host holds it**: rows the spent run left empty whose
  error column says ``deferred: <host>`` for a host whose quota ran out, and
  whose article, by the corpus's own truth, no service that still answers can
  state the fact for (see :func:`only_spent_holds`);
- **missed**: the rest. Every one is a fault of the library.

Two figures follow: ``found / reference`` (against the unspent world) and
``found / (reference - deferred)`` (against what the answering services hold,
the issue's figure). A deferral the truth does not excuse counts as missed.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass

from tests.fakes.world import Article

__all__ = ["ERROR_COLUMN", "FACT_COLUMNS", "FactAudit", "audit", "lines", "only_spent_holds"]

FACT_COLUMNS: tuple[str, ...] = ("pmcid", "doi", "body_source", "n_files", "licence", "access")
"""The columns compared: ids, bodies, files, licences and OA status."""

ERROR_COLUMN: Mapping[str, str] = {
    "pmcid": "resolve_error",
    "doi": "resolve_error",
    "body_source": "body_error",
    "n_files": "files_error",
    "licence": "licence_error",
    "access": "licence_error",
}
"""Where a row says why a fact column is empty."""

UNPAYWALL = "api.unpaywall.org"


@dataclass(frozen=True, slots=True)
class FactAudit:
    """One fact column of the spent run against the unspent one (counts of rows)."""

    column: str
    reference: int
    found: int
    deferred: int
    missed: int

    @property
    def of_unspent(self) -> float:
        """Share of the unspent run's facts the spent run found."""
        return self.found / self.reference if self.reference else 1.0

    @property
    def of_answering(self) -> float:
        """Share of the facts a service that still answers holds which the spent run found."""
        held = self.reference - self.deferred
        return self.found / held if held else 1.0


def only_spent_holds(article: Article | None, column: str, spent_hosts: Iterable[str]) -> bool:
    """Whether, in the fake's world, only a host in ``spent_hosts`` can state ``column``.

    OpenAlex's spent list budget excuses nothing: its singleton lookups are free.
    A spent Unpaywall day excuses a DOI OpenAlex does not know for the facts no
    other service states: the status ``closed`` (Semantic Scholar, Europe PMC and
    a body state only that an article is open) and a count of zero files (no
    other source lists the absence of a PDF).
    """
    if article is None or UNPAYWALL not in set(spent_hosts):
        return False
    if article.doi is None or article.in_openalex:
        return False
    if column == "access":
        return article.oa_status == "closed"
    if column == "n_files":
        return not (article.pdf_url and article.is_open) and not article.pmcid
    return False


def audit(
    articles: Sequence[Article | None],
    unspent: Mapping[str, Sequence[str | None]],
    spent: Mapping[str, Sequence[str | None]],
    spent_hosts: Iterable[str],
) -> list[FactAudit]:
    """Compare the spent run's fact columns with the unspent run's, row by row.

    ``unspent`` and ``spent`` map each column of :data:`FACT_COLUMNS` and of
    :data:`ERROR_COLUMN`'s values to one cell per row (``None`` when empty);
    ``articles`` gives each row's article (``None`` for an invalid row).
    """
    hosts = set(spent_hosts)
    out = []
    for column in FACT_COLUMNS:
        errors = spent.get(ERROR_COLUMN[column], [None] * len(articles))
        reference = found = deferred = 0
        for i, article in enumerate(articles):
            if unspent[column][i] is None:
                continue
            reference += 1
            if spent[column][i] is not None:
                found += 1
            elif _says_deferred(errors[i], hosts) and only_spent_holds(article, column, hosts):
                deferred += 1
        out.append(FactAudit(column, reference, found, deferred, reference - found - deferred))
    return out


def _says_deferred(error: str | None, hosts: set[str]) -> bool:
    return error is not None and any(f"deferred: {host}" in error for host in hosts)


def lines(audits: Sequence[FactAudit]) -> dict[str, str]:
    """The report lines of an audit."""
    return {
        "facts vs the unspent world (found/reference, deferred, missed)": ", ".join(
            f"{a.column} {a.found}/{a.reference} d{a.deferred} m{a.missed}" for a in audits
        ),
        "figures of the unspent world": ", ".join(f"{a.column} {a.of_unspent:.3f}" for a in audits),
        "figures from the services that still answer": ", ".join(
            f"{a.column} {a.of_answering:.3f}" for a in audits
        ),
    }
