"""Quotas as a budget: counted per host and day, kept beside the cache, a spent one defers.

The ledger is tested on its own (headers, periods, persistence) and at the frame's
surface: a spent OpenAlex list budget detours to the free singleton lookups, and a
spent Unpaywall day defers exactly the rows that needed it, which a re-run after the
reset fills.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any, ClassVar

import httpx
import pandas as pd
import pytest

import litfetch_df  # noqa: F401  (registers df.lit)
from litfetch_df.frame.engine.outcome import is_abandoned, is_deferred
from litfetch_df.store.quota import QuotaDeferred, QuotaLedger, describe_wait
from tests.conftest import mock_session
from tests.virtual_clock import EPOCH, VirtualClock

UNPAYWALL = "api.unpaywall.org"
OPENALEX = "api.openalex.org"
DAY = 86_400.0


def test_a_counted_quota_defers_with_the_time_to_the_reset(tmp_path: Path) -> None:
    now = [EPOCH]  # 2027-01-15 08:00 UTC: 16 h to midnight
    ledger = QuotaLedger(tmp_path, now=lambda: now[0], quotas={(UNPAYWALL, "single"): 2})
    for _ in range(2):
        ledger.check(UNPAYWALL, "/v2/10.1/a", {"email": "me@lab.example"})
        ledger.observe(UNPAYWALL, "/v2/10.1/a", {}, 200, {})
    with pytest.raises(
        QuotaDeferred, match=r"^api\.unpaywall\.org daily quota, resets in 16 h 0 min$"
    ):
        ledger.check(UNPAYWALL, "/v2/10.1/b", {})
    ledger.save()
    assert json.loads((tmp_path / "quota.json").read_text())["entries"]

    # A second run the same day knows the day is spent; the next day starts afresh.
    again = QuotaLedger(tmp_path, now=lambda: now[0] + 3600, quotas={(UNPAYWALL, "single"): 2})
    with pytest.raises(QuotaDeferred, match="resets in 15 h 0 min"):
        again.check(UNPAYWALL, "/v2/10.1/b", {})
    tomorrow = QuotaLedger(tmp_path, now=lambda: now[0] + DAY, quotas={(UNPAYWALL, "single"): 2})
    tomorrow.check(UNPAYWALL, "/v2/10.1/b", {})


def test_openalex_budget_headers_set_what_is_left_and_singletons_stay_free() -> None:
    ledger = QuotaLedger(None, now=lambda: EPOCH)
    works, flt = "/works", {"filter": "doi:10.1/a|10.1/b", "api_key": "k"}
    ledger.observe(OPENALEX, works, flt, 200, {"x-ratelimit-remaining-usd": "0.0002"})
    limit = ledger.metered(OPENALEX, works, flt)
    assert limit is not None and ledger.left(limit) == 2
    spent = ledger.observe(
        OPENALEX, works, flt, 429, {"X-RateLimit-Reset": "600"}, b'{"error":"Insufficient budget"}'
    )
    assert spent
    with pytest.raises(QuotaDeferred, match="resets in 10 min"):
        ledger.check(OPENALEX, works, flt)
    ledger.check(OPENALEX, "/works/doi:10.1/a", {"api_key": "k"})  # free: never deferred
    # A keyless caller is another tier with its own budget.
    keyless = {"filter": "doi:10.1/a"}
    assert ledger.metered(OPENALEX, works, keyless) is not None
    ledger.check(OPENALEX, works, keyless)


@pytest.mark.parametrize("value", ["inf", "nan", "-1", "1e309", "soon"])
def test_nonsense_budget_headers_are_ignored(value: str) -> None:
    ledger = QuotaLedger(None, now=lambda: EPOCH)
    flt = {"filter": "doi:10.1/a"}
    ledger.observe(OPENALEX, "/works", flt, 200, {"x-ratelimit-remaining-usd": value})
    limit = ledger.metered(OPENALEX, "/works", flt)
    assert limit is not None and ledger.left(limit) == 999  # the table's keyless 1,000, one used


def test_describe_wait() -> None:
    assert describe_wait(5 * 3600 + 12 * 60 + 5) == "5 h 12 min"
    assert describe_wait(59) == "under a minute"
    assert describe_wait(600) == "10 min"


# -- at the frame's surface ----------------------------------------------------------------------

KNOWN = ["10.1000/known.1", "10.1000/known.2"]
UNKNOWN = ["10.1000/dark.1", "10.1000/dark.2", "10.1000/dark.3"]


def _work(doi: str) -> dict[str, Any]:
    return {
        "id": "https://openalex.org/W1",
        "doi": f"https://doi.org/{doi}",
        "ids": {"doi": f"https://doi.org/{doi}"},
        "open_access": {"is_oa": True, "oa_status": "gold", "oa_url": None},
        "best_oa_location": {"license": "cc-by", "pdf_url": None, "version": "publishedVersion"},
    }


class World:
    """OpenAlex with a spent list budget, its singletons, and Unpaywall (counted)."""

    def __init__(self) -> None:
        self.asked: list[tuple[str, str]] = []
        self.budget_spent = True

    def __call__(self, request: httpx.Request) -> httpx.Response:
        host, path = request.url.host, request.url.path
        self.asked.append((host, path))
        if host == OPENALEX and path == "/works" and not self.budget_spent:
            asked = str(request.url.params.get("filter", "")).removeprefix("doi:").split("|")
            return httpx.Response(200, json={"results": [_work(d) for d in asked if d in KNOWN]})
        if host == OPENALEX and path == "/works":
            return httpx.Response(
                429,
                json={"error": "Insufficient budget", "message": "daily budget spent"},
                headers={"x-ratelimit-remaining-usd": "0", "X-RateLimit-Reset": "3600"},
            )
        if host == OPENALEX and path.startswith("/works/doi:"):
            doi = path.removeprefix("/works/doi:")
            if doi in KNOWN:
                return httpx.Response(200, json=_work(doi))
            return httpx.Response(404, json={"error": "not found"})
        if host == UNPAYWALL:
            doi = path.removeprefix("/v2/")
            return httpx.Response(200, json={"doi": doi, "oa_status": "green", "is_oa": True})
        return httpx.Response(404, json={})

    def count(self, host: str, prefix: str = "") -> int:
        return sum(1 for h, p in self.asked if h == host and p.startswith(prefix))


async def test_spent_budgets_detour_then_defer_and_a_rerun_after_the_reset_fills_them(
    tmp_path: Path,
) -> None:
    await _detour_then_defer(tmp_path)


async def licences(
    df: pd.DataFrame, world: World, cache: Path, clock: VirtualClock, calls: int = 1
) -> Any:
    quotas = {(UNPAYWALL, "single"): calls}
    async with mock_session(
        world, contact="me@lab.example", cache=cache, clock=clock, quotas=quotas
    ) as session:
        return await clock.run(df.lit.licences_async(session=session, progress=False))


async def _detour_then_defer(tmp_path: Path) -> None:
    df = pd.DataFrame({"doi": [*KNOWN, *UNKNOWN], "title": list("abcde")})
    world = World()
    cache = tmp_path / "cache"
    clock = VirtualClock()
    out = await licences(df, world, cache, clock)
    assert list(out["title"]) == list("abcde")  # rows kept, in order
    # The list budget spent: one list call, then the free singletons answer the known DOIs.
    assert world.count(OPENALEX, "/works") - world.count(OPENALEX, "/works/doi:") == 1
    assert list(out["licence_basis"][:2]) == ["openalex", "openalex"]
    assert list(out["oa_status"][:2]) == ["gold", "gold"]
    # Unpaywall's day holds one call: one unknown DOI is answered, two are deferred.
    assert world.count(UNPAYWALL) == 1
    errors = out["licence_error"].tolist()
    deferred = [i for i, e in enumerate(errors) if is_deferred(e)]
    assert len(deferred) == 2 and set(deferred) <= {2, 3, 4}
    for i in deferred:
        assert str(errors[i]).startswith("deferred: api.unpaywall.org daily quota, resets in ")
        assert "abandoned" not in str(errors[i]) and is_abandoned(errors[i])
    # The known rows have their terms; what they say is only that resolving their other
    # ids (OpenAlex's list call) waits for the reset.
    for error in out["licence_error"].iloc[:2]:
        assert pd.isna(error) or ("resolve" in error and "deferred: api.openalex.org" in error)

    # The same day, a re-run knows the day is spent and asks Unpaywall nothing.
    same_day = await licences(out, world, cache, clock)
    assert world.count(UNPAYWALL) == 1
    assert [i for i, e in enumerate(same_day["licence_error"]) if is_deferred(e)] == deferred

    # After the reset, the re-run fills exactly the deferred rows.
    world.budget_spent = False  # a new day: the list budget is back too
    # (A day of two calls: the calls sent together are held against it before they go,
    # so a day of one would fill one of the two.)
    filled = await licences(same_day, world, cache, VirtualClock(start=100.0 + DAY), calls=2)
    assert world.count(UNPAYWALL) == 3
    # (The rows' resolve_error from the first day stays until resolve() is run again.)
    assert not filled["licence_error"].map(lambda e: "api.unpaywall.org" in str(e)).any()
    assert list(filled["oa_status"][2:]) == ["green", "green", "green"]
    assert filled.loc[:1, "licence_basis"].tolist() == ["openalex", "openalex"]


# -- resolution's detour -------------------------------------------------------------------------


class IdsWorld:
    """OpenAlex works with PMIDs: the list filter answers ``list_status`` (429 budget or 503)."""

    PMIDS: ClassVar[dict[str, str]] = {"10.1000/known.1": "31000001", "10.1000/known.2": "31000002"}

    def __init__(self, list_status: int) -> None:
        self.list_status = list_status
        self.asked: list[str] = []

    def __call__(self, request: httpx.Request) -> httpx.Response:
        path = request.url.path
        self.asked.append(path)
        if path == "/works":
            if self.list_status == 429:
                return httpx.Response(
                    429,
                    json={"error": "Insufficient budget", "message": "daily budget spent"},
                    headers={"x-ratelimit-remaining-usd": "0", "X-RateLimit-Reset": "3600"},
                )
            return httpx.Response(self.list_status, json={"error": "unavailable"})
        doi = path.removeprefix("/works/doi:")
        if doi in self.PMIDS:
            work = _work(doi)
            work["ids"]["pmid"] = f"https://pubmed.ncbi.nlm.nih.gov/{self.PMIDS[doi]}"
            return httpx.Response(200, json=work)
        return httpx.Response(404, json={"error": "not found"})


async def _resolve(world: IdsWorld) -> pd.DataFrame:
    from litfetch_df.operations.resolution import OpenAlexResolver

    df = pd.DataFrame({"doi": [*KNOWN, UNKNOWN[0]]})
    clock = VirtualClock()
    async with mock_session(world, contact="me@lab.example", clock=clock) as session:
        return await clock.run(
            df.lit.resolve_async(session=session, progress=False, resolver=OpenAlexResolver())
        )


async def test_a_spent_list_budget_resolves_by_the_free_singletons() -> None:
    world = IdsWorld(429)
    out = await _resolve(world)
    # One list call finds the budget spent; then one singleton per DOI, free of it.
    assert world.asked.count("/works") == 1
    assert sorted(p for p in world.asked if p != "/works") == sorted(
        f"/works/doi:{d}" for d in [*KNOWN, UNKNOWN[0]]
    )
    assert out["pmid"].tolist()[:2] == ["31000001", "31000002"]
    # Nothing was lost: OpenAlex answered every DOI (the third it does not know).
    assert out["resolve_error"].isna().all()


async def test_a_list_call_not_answered_for_another_reason_sends_no_singletons() -> None:
    world = IdsWorld(503)
    out = await _resolve(world)
    assert all(p == "/works" for p in world.asked)
    assert out["resolve_error"].map(is_abandoned).all()


def test_calls_sent_together_are_held_against_the_budget_before_their_answers() -> None:
    ledger = QuotaLedger(None, now=lambda: EPOCH, quotas={(UNPAYWALL, "single"): 2})
    ledger.reserve(UNPAYWALL, "/v2/10.1/a", {})
    ledger.reserve(UNPAYWALL, "/v2/10.1/b", {})
    with pytest.raises(QuotaDeferred):
        ledger.reserve(UNPAYWALL, "/v2/10.1/c", {})  # two in flight: none left to send
    ledger.release(UNPAYWALL, "/v2/10.1/b", {})  # one got no answer: its call comes back
    ledger.observe(UNPAYWALL, "/v2/10.1/a", {}, 200, {})
    ledger.reserve(UNPAYWALL, "/v2/10.1/c", {})
    with pytest.raises(QuotaDeferred):
        ledger.reserve(UNPAYWALL, "/v2/10.1/d", {})


async def test_a_request_cancelled_in_flight_gives_its_held_call_back() -> None:
    import asyncio

    started = asyncio.Event()
    answer = asyncio.Event()

    async def handler(request: httpx.Request) -> httpx.Response:
        if request.url.path.endswith("/a"):
            started.set()
            await answer.wait()  # never set: this one is cancelled in flight
        return httpx.Response(200, json={"doi": "10.1/b"}, request=request)

    session = mock_session(
        handler,  # type: ignore[arg-type]
        contact="me@lab.example",
        quotas={(UNPAYWALL, "single"): 1},
    )
    async with session:
        stuck = asyncio.create_task(session.get(f"https://{UNPAYWALL}/v2/10.1/a"))
        await started.wait()
        with pytest.raises(QuotaDeferred):  # the one call is held by the request in flight
            await session.get(f"https://{UNPAYWALL}/v2/10.1/b")
        stuck.cancel()
        with pytest.raises(asyncio.CancelledError):
            await stuck
        # Cancelled without an answer: the day's one call is back, and this one may use it.
        assert (await session.get(f"https://{UNPAYWALL}/v2/10.1/b")).status_code == 200
        with pytest.raises(QuotaDeferred):
            await session.get(f"https://{UNPAYWALL}/v2/10.1/c")
