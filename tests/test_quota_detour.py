"""A spent Unpaywall day is a detour, then a deferral (issue 24, item 4).

When the session's quota ledger says Unpaywall's day is spent, no Unpaywall
request is sent: the licences step takes the terms the run already holds from
Semantic Scholar (and Crossref, Europe PMC), each under its own basis, and the
file-set stands Semantic Scholar's held paper answer in for Unpaywall's best-OA
PDF. Only a row no service knows says ``deferred: api.unpaywall.org daily
quota, resets in …``. Everything runs over ``httpx.MockTransport`` on a
virtual clock.
"""

from __future__ import annotations

import json
from typing import Any

import httpx
import pandas as pd

import litfetch_df  # noqa: F401  (registers df.lit)
from litfetch_df.frame.engine.outcome import given_up_in, is_abandoned, is_deferred
from litfetch_df.ids import ArticleIds
from litfetch_df.sources.unpaywall import UnpaywallFileSource, unpaywall_spent
from litfetch_df.store.quota import QuotaLedger
from tests.conftest import mock_session
from tests.virtual_clock import VirtualClock

UNPAYWALL = "api.unpaywall.org"
S2 = "api.semanticscholar.org"
CROSSREF = "api.crossref.org"

S2_OPEN = "10.1000/s2.open"  # S2 classifies it and lists its PDF
S2_BLANK = "10.1000/s2.blank"  # S2 knows the paper, states no open copy or status
LICENSED = "10.1000/xref.only"  # only Crossref's deposited licence
DARK = "10.1000/dark"  # no service knows it
PDF_URL = "https://publisher.example/s2-open.pdf"


class World:
    """OpenAlex knows none of the DOIs; S2 and Crossref know some; Unpaywall is counted."""

    def __init__(self) -> None:
        self.asked: list[tuple[str, str]] = []

    def __call__(self, request: httpx.Request) -> httpx.Response:
        host, path = request.url.host, request.url.path
        self.asked.append((host, path))
        if host == "api.openalex.org" and path == "/works":
            return httpx.Response(200, json={"meta": {"count": 0}, "results": []})
        if host == S2 and path == "/graph/v1/paper/batch":
            asked = json.loads(request.content or b"{}").get("ids", [])
            return httpx.Response(200, json=[_s2_record(str(i)) for i in asked])
        if host == CROSSREF and path == "/works":
            return httpx.Response(200, json={"status": "ok", "message": {"items": [_xref()]}})
        if host == UNPAYWALL:
            doi = path.removeprefix("/v2/")
            return httpx.Response(200, json={"doi": doi, "oa_status": "green", "is_oa": True})
        return httpx.Response(404, json={})

    def count(self, host: str) -> int:
        return sum(1 for h, _ in self.asked if h == host)


def _s2_record(ident: str) -> dict[str, Any] | None:
    doi = ident.removeprefix("DOI:").lower()
    if doi == S2_OPEN:
        pdf = {"url": PDF_URL, "status": "HYBRID", "license": "CCBY", "disclaimer": ""}
    elif doi == S2_BLANK:
        pdf = None
    else:
        return None  # S2 does not know the paper
    return {"paperId": "a" * 40, "externalIds": {"DOI": doi}, "openAccessPdf": pdf}


def _xref() -> dict[str, Any]:
    return {
        "DOI": LICENSED,
        "license": [
            {"URL": "https://creativecommons.org/licenses/by/4.0/", "content-version": "vor"}
        ],
    }


async def _run(world: World, calls: int = 0) -> pd.DataFrame:
    df = pd.DataFrame({"doi": [S2_OPEN, S2_BLANK, LICENSED, DARK]})
    clock = VirtualClock()
    quotas = {(UNPAYWALL, "single"): calls}
    async with mock_session(world, contact="me@lab.example", clock=clock, quotas=quotas) as session:
        out = await clock.run(
            df.lit.run_async(steps=("files", "licences"), session=session, progress=False)
        )
    indexed: pd.DataFrame = out.set_index("doi")
    return indexed


async def test_a_spent_unpaywall_day_sends_no_unpaywall_request() -> None:
    world = World()
    await _run(world)
    assert world.count(UNPAYWALL) == 0
    assert world.count(S2) == 1  # the batch the file-set primes, read by both steps


async def test_the_other_held_answers_fill_oa_status_under_their_own_names() -> None:
    out = await _run(World())
    row = out.loc[S2_OPEN]
    assert row["oa_status"] == "hybrid"
    assert row["access"] == "HYBRID"
    assert row["licence"] == "CCBY"
    assert row["licence_basis"] == "semantic_scholar"
    assert row.isna()["licence_error"]
    # Its file comes from S2's held answer; Unpaywall's absence costs the row nothing.
    assert [f.uri for f in row["files"]] == [PDF_URL]
    assert [f.source for f in row["files"]] == ["semantic_scholar"]
    assert row.isna()["files_error"]
    # No fact is credited to the service that was not asked.
    for column in ("licence_basis", "access_basis"):
        assert "unpaywall" not in out[column].dropna().tolist()
    assert all(f.source != "unpaywall" for files in out["files"].dropna() for f in files)


async def test_only_rows_no_service_knows_are_deferred() -> None:
    out = await _run(World())
    wording = "deferred: api.unpaywall.org daily quota, resets in "
    # Nobody knows DARK: both steps wait for Unpaywall's reset.
    assert str(out.loc[DARK, "licence_error"]).startswith(wording)
    assert str(out.loc[DARK, "files_error"]).startswith(wording)
    # S2 knows S2_BLANK (no open copy): its file-set is complete without Unpaywall.
    assert out["files_error"].isna()[S2_BLANK]
    # ...but nobody classified its access, so its terms wait for the reset.
    assert is_deferred(out.loc[S2_BLANK, "licence_error"])
    # Crossref's licence is kept, under Crossref's name; the status still waits: the row
    # is partial, names the deferral, and a re-run does it again.
    assert out.loc[LICENSED, "licence"] == "https://creativecommons.org/licenses/by/4.0/"
    assert out.loc[LICENSED, "licence_basis"] == "crossref"
    error = str(out.loc[LICENSED, "licence_error"])
    assert error.startswith(f"partial: api.unpaywall.org {wording}")
    assert "abandoned" not in error and is_abandoned(error)  # not abandoned, but redone
    # Read back, the deferral is the lost source's reason.
    assert [(g.source, g.reason[: len(wording)]) for g in given_up_in(error)] == [
        ("api.unpaywall.org", wording)
    ]
    assert out["oa_status"].isna()[LICENSED]
    assert not is_deferred(out.loc[S2_OPEN, "licence_error"])


async def test_a_day_with_calls_left_still_asks_unpaywall_for_what_openalex_lacks() -> None:
    # The detour is for a spent day only: with calls left, Unpaywall is asked as before.
    world = World()
    out = await _run(world, calls=100)
    assert world.count(UNPAYWALL) > 0
    assert out.loc[DARK, "oa_status"] == "green"
    assert not out["licence_error"].map(is_deferred).any()


def test_spent_reads_the_ledger_without_holding_a_call() -> None:
    ledger = QuotaLedger(now=lambda: 1_000_000.0, quotas={(UNPAYWALL, "single"): 2})
    params = {"email": "me@lab.example"}
    assert not ledger.spent(UNPAYWALL, "/v2/10.1/x", params)
    ledger.reserve(UNPAYWALL, "/v2/10.1/x", params)
    assert not ledger.spent(UNPAYWALL, "/v2/10.1/y", params)  # asking held nothing
    ledger.reserve(UNPAYWALL, "/v2/10.1/y", params)
    # Two calls out, none answered yet: a third would be refused, and spent() says so.
    assert ledger.spent(UNPAYWALL, "/v2/10.1/z", params)
    ledger.release(UNPAYWALL, "/v2/10.1/y", params)
    assert not ledger.spent(UNPAYWALL, "/v2/10.1/z", params)
    # An unmetered host is never spent.
    assert not ledger.spent("www.ebi.ac.uk", "/europepmc/webservices/rest/search", {})


class _Ledgered:
    """An Http stand-in with a ledger and a contact; any request fails the test."""

    contact = "me@lab.example"

    def __init__(self, ledger: QuotaLedger | None) -> None:
        self.quota = ledger

    async def get(self, *args: Any, **kwargs: Any) -> httpx.Response:
        raise AssertionError("no request may be sent")


def test_unpaywall_spent_needs_a_ledger_that_says_so() -> None:
    spent = QuotaLedger(now=lambda: 1_000_000.0, quotas={(UNPAYWALL, "single"): 0})
    left = QuotaLedger(now=lambda: 1_000_000.0, quotas={(UNPAYWALL, "single"): 5})
    assert unpaywall_spent(_Ledgered(spent), "10.1000/x")  # type: ignore[arg-type]
    assert not unpaywall_spent(_Ledgered(left), "10.1000/x")  # type: ignore[arg-type]
    assert not unpaywall_spent(_Ledgered(None), "10.1000/x")  # type: ignore[arg-type]


async def test_the_file_source_without_a_held_s2_answer_still_meets_the_refusal() -> None:
    # No held answers at all (a plain Http): the source cannot stand S2 in, so it asks,
    # which is the session's to refuse; this stand-in shows the request is attempted.
    source = UnpaywallFileSource()
    http = _Ledgered(QuotaLedger(now=lambda: 1_000_000.0, quotas={(UNPAYWALL, "single"): 0}))
    try:
        await source.list_files(ArticleIds(doi="10.1000/x"), http=http)  # type: ignore[arg-type]
    except AssertionError as exc:
        assert "no request" in str(exc)
    else:
        raise AssertionError("the source listed without asking")


# -- units read an answer once it is primed, not once the whole lookup is in ----------------------


async def test_a_unit_reads_its_primed_answer_while_the_lookup_still_runs() -> None:
    import asyncio

    from litfetch_df.frame.engine import bulk
    from litfetch_df.frame.engine.gates import Gates, Slot, UnitHttp
    from litfetch_df.frame.engine.primed_keys import PrimedKeys
    from litfetch_df.sources.openalex import TERMS_SELECT, works_request
    from litfetch_df.store.answers import CachedResponse

    mine = works_request(["10.1000/first"], select=TERMS_SELECT)
    other = works_request(["10.1000/last"], select=TERMS_SELECT)
    answer = CachedResponse(status_code=200, headers=(), content=b'{"results": []}', url="")
    finish = asyncio.Event()

    async with mock_session(World(), contact="me@lab.example") as session:
        gates = Gates()
        keys = PrimedKeys(session)
        keys.on_add = gates.primed

        async def lookup() -> list[str]:
            # Primes one answer, then waits (its other answers still to come).
            await asyncio.sleep(0)
            prime = session.prime
            keys.add(
                ArticleIds(doi="10.1000/first"),
                prime("GET", mine.url, params=mine.params, response=answer),
            )
            await finish.wait()
            keys.add(
                ArticleIds(doi="10.1000/last"),
                prime("GET", other.url, params=other.params, response=answer),
            )
            return list(keys)

        task = asyncio.ensure_future(lookup())
        gates.add(bulk.Service.OPENALEX_TERMS, task)
        async with session.scope() as scope:
            http = UnitHttp(scope, gates, Slot(asyncio.Semaphore(1)))
            try:
                reading = asyncio.ensure_future(
                    http.held(mine.url, params=mine.params, headers=mine.headers)
                )
                waiting = asyncio.ensure_future(
                    http.held(other.url, params=other.params, headers=other.headers)
                )
                for _ in range(20):  # let every ready task run; no clock involved
                    await asyncio.sleep(0)
                # Read while the lookup is still running: it was primed, nothing can change it.
                assert reading.done() and not task.done()
                held = reading.result()
                assert held is not None and held.status_code == 200
                # A request the lookup has not primed yet still waits for it.
                assert not waiting.done()
            finally:
                finish.set()
            assert (await waiting) is not None
        await task
