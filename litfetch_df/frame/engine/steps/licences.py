"""The licences step: access terms from the body a row holds, the rest from the services.

Read from the body bytes where the row holds a body (``body`` or
``body_path``; basis ``'artifact'``), else — or for whatever the bytes leave
out, typically the access status — asked of Unpaywall by DOI (basis
``'unpaywall'``; needs a contact), and as a last resort for the licence,
Crossref's deposited ``license[]`` (basis ``'crossref'``). Rows of one
bundle that hold different bodies are judged apart. With Unpaywall's day spent
(the session's quota ledger says so, no request sent), the held Crossref,
Semantic Scholar, OpenAlex and Europe PMC answers stand in, each under its own
basis; only a row none of them gives an access status is deferred.
"""

from __future__ import annotations

import dataclasses
import os
import warnings
from collections.abc import Callable, Hashable, Mapping, Sequence
from typing import Any, ClassVar, Final, cast

from ....files import Blob, File, FileKind
from ....ids import ArticleIds
from ....metadata import SourceMetadata
from ....wire.http import Http, get_logger
from ...io.table import text
from ...io.urlout import read_location
from .. import bulk
from ..context import CallContext
from ..errors import untagged
from ..licence_family import licence_family
from ..oa_status import service_oa_status
from ..offload import offload
from ..outcome import GivenUp, Partial, given_up_in, is_abandoned, is_partial
from ..plan import Plan
from ..runner import Job, UnitStep
from .bodies import BODY_COLUMNS, WRITTEN_BLOB, WRITTEN_PATH

__all__ = ["LicenceInput", "LicencesStep", "licence_work"]

log = get_logger(__name__)

_DTYPES: Final = {
    "licence": "string",
    "licence_family": "string",
    "access": "string",
    "oa_status": "string",
    "licence_basis": "string",
    "access_basis": "string",
    "licence_error": "string",
}


@dataclasses.dataclass(frozen=True, slots=True)
class LicenceInput:
    """What one licence unit reads: the bundle, and the body bytes (or file) the row holds."""

    ids: ArticleIds
    body: Blob | str | None
    media_type: str | None
    source: str | None


def _held_body(body: object, path: object) -> tuple[Hashable, Blob | str | None]:
    """Return a row's body for the licence step and a token naming it (rows share by token).

    A Blob in ``body`` wins, then a file at ``body_path``; neither gives ``(None, None)``.
    """
    if isinstance(body, Blob):
        return ("blob", id(body)), body
    if isinstance(path, str | os.PathLike):
        where = os.fspath(cast("str | os.PathLike[str]", path))
        return ("path", where), where
    return None, None


def _extract(blob: Blob) -> SourceMetadata:
    from ....operations.licence import extract_source_metadata

    try:
        return extract_source_metadata(blob)
    except Exception as exc:  # unreadable bytes carry no licence; Unpaywall may still know
        log.debug("no licence from the body bytes: %s", type(exc).__name__)
        return SourceMetadata()


async def licence_work(
    http: Http, item: LicenceInput, credentials: Mapping[str, object] | None = None
) -> SourceMetadata:
    """Terms from the body bytes; what they leave out from Unpaywall, held answers, Crossref.

    Unpaywall is asked for every row with a DOI: besides any licence or access
    status the bytes leave out, it is the main source of the article's
    open-access colour (``oa_status``), which a body's ``open-access`` does not
    give. A licence still missing comes from Crossref's deposit; whatever is
    still missing then is read from the Semantic Scholar, OpenAlex and Europe
    PMC answers the session already holds (no request; see
    :func:`~litfetch_df.operations.service_terms.service_terms`).
    """
    body = item.body
    meta = SourceMetadata()
    if body is not None:
        if isinstance(body, Blob):
            blob = body
        else:
            content = await offload(read_location, body)
            file = File(FileKind.BODY, item.source or "file", media_type=item.media_type)
            blob = Blob(file, content)
        meta = await offload(_extract, blob)
    from ....operations.service_terms import service_terms

    if item.ids.doi is None:
        # PMCID-only rows may still be in Europe PMC's held answers, PMID-only in S2's.
        return await service_terms(http, item.ids, meta, credentials=credentials)
    from ....operations.access import fill_missing_terms

    asserted = await asserted_terms(http, item.ids.doi, credentials, have=meta, ids=item.ids)
    merged = fill_missing_terms(meta, asserted)
    status = service_oa_status(asserted)
    if status is not None:
        merged = dataclasses.replace(merged, oa_status=status)
    if merged.licence is None:
        # The publisher's own deposit, version of record first, before the services' word.
        merged = await _crossref_licence(http, item.ids.doi, merged)
    return await service_terms(http, item.ids, merged, credentials=credentials)


async def asserted_terms(
    http: Http,
    doi: str,
    credentials: Mapping[str, object] | None = None,
    *,
    have: SourceMetadata | None = None,
    ids: ArticleIds | None = None,
) -> SourceMetadata:
    """The access terms a service asserts for ``doi``: OpenAlex where it knows the work.

    OpenAlex and Unpaywall serve the same open-access facts (one pipeline since
    2025), and OpenAlex answers a hundred DOIs a request: the work the frame's
    bulk filter holds answers (basis ``'openalex'``). Unpaywall is asked, one
    request per DOI, only where OpenAlex does not know the DOI; where no bulk
    answer is held (the lookup was given up, say its budget was spent) the free
    singleton ``/works/doi:…`` is tried first, then Unpaywall.

    When the quota ledger says Unpaywall's day is spent, it is not asked where
    the answers the run already holds state an access status (``have``, the
    body's terms, then Crossref's licence and the Semantic Scholar, OpenAlex
    and Europe PMC answers for ``ids``, the row's bundle: :func:`_held_terms`);
    those terms are returned,
    each with its own basis. Only where none of them knows is Unpaywall asked,
    and the session refuses that request unsent, so the row says
    ``deferred: api.unpaywall.org daily quota, resets in …``.
    """
    from ....operations.access import resolve_access
    from ....sources.common import usable_credential
    from ....sources.openalex import fetch_single_work, held_work, openalex_access

    api_key = usable_credential(credentials, "openalex_api_key")
    held = await held_work(http, doi, api_key=api_key)
    work = held.work
    if held.state == "not held":
        work = await fetch_single_work(http, doi, api_key=api_key)
    if work is not None:
        terms = openalex_access(work)
        if not terms.is_empty():
            return terms
    from ....sources.unpaywall import unpaywall_spent

    if unpaywall_spent(http, doi):
        # The detour: the answers held this run, read without a request.
        bundle = ids if ids is not None else ArticleIds(doi=doi)
        held_terms = await _held_terms(http, bundle, doi, have or SourceMetadata(), credentials)
        if held_terms.access is not None:
            return held_terms
    return await resolve_access(http, ArticleIds(doi=doi))


async def _held_terms(
    http: Http,
    ids: ArticleIds,
    doi: str,
    have: SourceMetadata,
    credentials: Mapping[str, object] | None,
) -> SourceMetadata:
    """What the run holds of ``doi``'s terms besides Unpaywall: ``have``, Crossref, the services.

    The same sources, in the same order, that :func:`licence_work` reads after
    Unpaywall; a field ``have`` holds stays, with its basis.
    """
    from ....operations.service_terms import service_terms

    merged = have
    if merged.licence is None:
        merged = await _crossref_licence(http, doi, merged)
    return await service_terms(http, ids, merged, credentials=credentials)


async def _crossref_licence(http: Http, doi: str, meta: SourceMetadata) -> SourceMetadata:
    """Fill a missing licence from the DOI's Crossref ``license[]`` (basis ``'crossref'``).

    The last resort: neither the body nor Unpaywall named a licence. Crossref
    states what the publisher deposited, the version of record's licence first;
    it says nothing of access. The frame answers this request from its bulk
    Crossref lookup (100 DOIs a request), so it costs no per-row request.
    """
    from ....sources.crossref import crossref_licence, fetch_crossref_work

    record = await fetch_crossref_work(http, doi)
    found = crossref_licence(record) if record is not None else SourceMetadata()
    if found.licence is None:
        return meta
    return dataclasses.replace(meta, licence=found.licence, basis="crossref")


def _warn_without_contact(method: str) -> None:
    warnings.warn(
        f"{method}(): no contact email is set, so Unpaywall cannot be asked; rows "
        "without licence-bearing body bytes get at most the licence the publisher "
        "deposited with Crossref and what Semantic Scholar, OpenAlex or Europe PMC "
        "already stated, and oa_status is NA for the others. "
        "Pass contact='you@example.org' "
        "or set LITFETCH_DF_CONTACT.",
        UserWarning,
        stacklevel=5,
    )


@dataclasses.dataclass(frozen=True, slots=True)
class LicencesStep(UnitStep):
    """Report each row's access terms; ``caller`` names the method in the no-contact warning.

    ``credentials`` are the call's: the held answers are read with the keys
    the bulk lookups were made with.
    """

    name: ClassVar[str] = "licences"
    error_column: ClassVar[str] = "licence_error"
    desc: ClassVar[str] = "licences"
    # The body's error too: terms read from a body a lower rung served (a higher one was
    # given up) may not be the best body's, so they are partial as the body is.
    reads: ClassVar[tuple[str, ...]] = (*BODY_COLUMNS, "body_error")

    caller: str = "licences"
    credentials: Mapping[str, object] = dataclasses.field(default_factory=dict)
    # On a re-run, the held-answer lookups some row lost the first time (see keep_earlier).
    _again: set[bulk.Service] = dataclasses.field(
        default_factory=set, init=False, repr=False, compare=False
    )

    @property
    def dtypes(self) -> Mapping[str, str]:
        """The licence, its family, access, OA status, their bases, ``licence_error``."""
        return _DTYPES

    def services(self) -> frozenset[bulk.Service]:
        """Crossref, the licence's last resort (Unpaywall has no bulk form).

        The Semantic Scholar, OpenAlex and Europe PMC answers that state terms
        are read only where the call holds them anyway (in ``run()``, the
        bodies and file-set steps' lookups; else the persistent cache): asking
        for them here would cost requests for rows whose bytes already said it all.
        A re-run adds the lookups its rows lost (see :meth:`keep_earlier`).
        """
        return bulk.for_licences() | self._again

    def keep_earlier(self, plan: Plan, earlier: Callable[[str], Sequence[object]]) -> None:
        """Make again the held-answer lookups a redone row lost (its error names them).

        The terms read from Semantic Scholar, Europe PMC or OpenAlex answers
        come from lookups other steps of the first call made; a row that lost
        one is partial, and its re-run must hold that answer to read it.
        """
        errors = earlier(self.error_column)
        for i in plan.todo:
            self._again.update(bulk.lost_terms_lookups(errors[i]))

    def prepare(self, plan: Plan, ctx: CallContext) -> None:
        """Warn once when rows with a DOI cannot ask Unpaywall (no contact)."""
        if ctx.session.contact is None and any(plan.bundles[i].doi for i in plan.todo):
            _warn_without_contact(self.caller)

    def token(self, cells: Mapping[str, object]) -> Hashable:
        """Rows of one bundle share the work when they hold the same body."""
        error = cells.get("body_error")  # partial or abandoned bodies make partial terms
        return _held_body(cells.get("body"), cells.get("body_path"))[0], error

    async def work(self, http: Http, job: Job) -> SourceMetadata | Partial[SourceMetadata]:
        """The terms for the rows holding this body."""
        _, held = _held_body(job.cells.get("body"), job.cells.get("body_path"))
        if isinstance(held, str) and job.scratch.get(WRITTEN_PATH) == held:
            # The bytes the bodies step just wrote are still in memory: no need to read them.
            held = cast(Blob, job.scratch[WRITTEN_BLOB])
        media, source = job.cells.get("body_media_type"), job.cells.get("body_source")
        item = LicenceInput(job.ids, held, text(media), text(source))
        meta = await licence_work(http, item, self.credentials)
        body_error = job.cells.get("body_error")
        # Not complete: the unit's own requests given up count as well.
        if held is not None and is_partial(body_error):
            return Partial(meta, given_up_in(body_error), complete=False)
        if held is None and is_abandoned(body_error):
            # Read without the body its row should hold: the body's terms may differ.
            lost = untagged(str(body_error)).removeprefix("abandoned: ")
            return Partial(meta, (GivenUp("body", lost),), complete=False)
        return meta

    def cells(self, value: Any) -> Mapping[str, object]:
        """The licence cells (none for an empty answer)."""
        meta = cast(SourceMetadata, value)
        if meta.is_empty():
            return {}
        return {
            "licence": meta.licence,
            "licence_family": licence_family(meta.licence),
            "access": meta.access,
            "oa_status": meta.oa_status,
            "licence_basis": meta.basis,
            "access_basis": meta.access_from,
        }

    def empty(self, value: Any) -> bool:
        """Nothing known of the terms."""
        return cast(SourceMetadata, value).is_empty()

    def label(self, value: Any) -> str | None:
        """Where the licence came from."""
        return cast(SourceMetadata, value).basis
