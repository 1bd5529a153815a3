"""The fake's injected faults: deterministic per seed and attempt, shaped as real hosts fail."""

from __future__ import annotations

import collections

import httpx
import pytest

from benchmarks.convergence import compare, differing_rows
from tests.fake_upstream import FakeUpstream
from tests.fakes.faults import FaultKind, FaultPlan
from tests.fakes.world import HOST_CROSSREF, HOST_UNPAYWALL, Article, World

ARTICLE = Article(doi="10.5555/fault-1", oa_status="gold")
UNPAYWALL = f"https://{HOST_UNPAYWALL}/v2/{ARTICLE.doi}"


def _draws(plan: FaultPlan, n: int) -> list[FaultKind | None]:
    return [plan.draw("h", "GET", f"/x/{i}", "") for i in range(n)]


def test_the_same_seed_fails_the_same_requests_in_the_same_kinds() -> None:
    first, again, other = (FaultPlan(0.3, seed=s) for s in (4, 4, 5))
    assert _draws(first, 300) == _draws(again, 300)
    assert _draws(first, 300) != _draws(other, 300)


def test_the_share_and_every_kind_are_drawn() -> None:
    draws = _draws(FaultPlan(0.25, seed=1), 4000)
    failed = [d for d in draws if d is not None]
    assert 0.2 < len(failed) / len(draws) < 0.3
    assert set(failed) == set(FaultKind)
    assert _draws(FaultPlan(0.0), 200) == [None] * 200


def test_a_retry_of_the_same_request_is_a_fresh_draw() -> None:
    plan = FaultPlan(0.5, seed=2)
    attempts = [plan.draw("h", "GET", "/same", "q=1") for _ in range(40)]
    assert None in attempts and any(a is not None for a in attempts)
    replay = FaultPlan(0.5, seed=2)
    assert [replay.draw("h", "GET", "/same", "q=1") for _ in range(40)] == attempts


def test_a_share_outside_zero_to_one_is_refused() -> None:
    with pytest.raises(ValueError, match="share"):
        FaultPlan(1.5)


async def _get(fake: FakeUpstream, kind: FaultKind) -> httpx.Response:
    world = World([ARTICLE])
    world.install(fake, faults=FaultPlan(1.0, kinds=(kind,), stall=0.0))
    async with fake.client_factory()() as c:
        response = await c.get(UNPAYWALL, params={"email": "a@b.org"})
    assert world.faulted[HOST_UNPAYWALL] == 1 and world.fault_kinds[kind.value] == 1
    return response


async def test_a_truncated_answer_is_cut_short_without_content_length(fake: FakeUpstream) -> None:
    response = await _get(fake, FaultKind.TRUNCATED)
    assert response.status_code == 200 and "content-length" not in response.headers
    whole = World([ARTICLE])
    clean = FakeUpstream().start()
    try:
        whole.install(clean)
        async with clean.client_factory()() as c:
            full = await c.get(UNPAYWALL, params={"email": "a@b.org"})
    finally:
        clean.stop()
    assert full.status_code == 200
    assert 0 < len(response.content) < len(full.content)
    assert full.content.startswith(response.content)


async def test_an_html_error_page_comes_with_status_200(fake: FakeUpstream) -> None:
    response = await _get(fake, FaultKind.HTML_PAGE)
    assert response.status_code == 200
    assert response.headers["content-type"].startswith("text/html")
    assert response.content.startswith(b"<!DOCTYPE html>")


@pytest.mark.parametrize(
    ("kind", "status"),
    [
        (FaultKind.HTTP_500, 500),
        (FaultKind.HTTP_502, 502),
        (FaultKind.HTTP_503, 503),
        (FaultKind.THROTTLED, 429),
    ],
)
async def test_error_statuses_carry_no_retry_after(
    fake: FakeUpstream, kind: FaultKind, status: int
) -> None:
    response = await _get(fake, kind)
    assert response.status_code == status and "retry-after" not in response.headers


@pytest.mark.parametrize("kind", [FaultKind.RESET, FaultKind.STALL])
async def test_a_reset_or_a_stall_ends_without_an_answer(
    fake: FakeUpstream, kind: FaultKind
) -> None:
    world = World([ARTICLE])
    world.install(fake, faults=FaultPlan(1.0, kinds=(kind,), stall=0.0))
    async with fake.client_factory()() as c:
        with pytest.raises(httpx.TransportError):
            await c.get(UNPAYWALL, params={"email": "a@b.org"})
    assert world.faulted[HOST_UNPAYWALL] == 1


async def test_without_a_plan_nothing_fails(fake: FakeUpstream) -> None:
    world = World([ARTICLE])
    world.install(fake)
    async with fake.client_factory()() as c:
        statuses = collections.Counter(
            [(await c.get(UNPAYWALL, params={"email": "a@b.org"})).status_code for _ in range(5)]
            + [(await c.get(f"https://{HOST_CROSSREF}/works/{ARTICLE.doi}")).status_code]
        )
    assert statuses == {200: 6} and not world.faulted


def test_compare_counts_rows_and_columns_that_differ() -> None:
    clean = [{"doi": "a", "licence": "cc-by"}, {"doi": "b", "licence": "NA"}]
    faulted = [{"doi": "a", "licence": "NA"}, {"doi": "b", "licence": "NA"}]
    result = compare(clean, faulted)
    assert (result.rows, result.rows_differing) == (2, 1)
    assert result.columns == {"licence": 1}
    assert result.example["licence"] == ("cc-by", "NA")
    assert compare(clean, clean).rows_differing == 0


def test_differing_rows_name_each_row_and_its_cells_in_full() -> None:
    clean = [
        {"doi": "'10.1/a'", "pmid": "NA", "files": "[File(a), File(b)]"},
        {"doi": "'10.1/b'", "pmid": "'1'", "files": "[]"},
    ]
    faulted = [{"doi": "'10.1/a'", "pmid": "NA", "files": "[File(b)]"}, dict(clean[1])]
    assert differing_rows(clean, faulted) == [
        {
            "row": 0,
            "ids": {"doi": "'10.1/a'"},
            "differ": {"files": {"clean": "[File(a), File(b)]", "faulted": "[File(b)]"}},
        }
    ]
    assert differing_rows(clean, clean) == []
