"""Session.prime: exact requests answered from memory, in every scope, never persisted."""

from __future__ import annotations

import json
from pathlib import Path

import httpx
import pytest

from litfetch_df import Rate
from litfetch_df.session import CachedResponse, NotInCache, request_key
from litfetch_df.wire.http import UpstreamUnavailable
from tests.conftest import mock_session

S2 = "https://api.semanticscholar.org/graph/v1/paper/DOI:10.1000/abc.1"
S2_BODY = {
    "paperId": "5b1c0e2f0d7a4c3e9f8b6a1d2c3e4f5a6b7c8d9e",
    "openAccessPdf": {
        "url": "https://repository.example.org/bitstream/1/paper.pdf",
        "status": "GREEN",
        "license": "CCBY",
        "disclaimer": "…",
    },
}
NETWORK_BODY = {"paperId": "from-the-network", "openAccessPdf": None}


def primed_answer(body: object = S2_BODY, status: int = 200) -> CachedResponse:
    return CachedResponse(
        status_code=status,
        headers=(("content-type", "application/json"),),
        content=json.dumps(body).encode(),
        url="",
    )


class Upstream:
    """A MockTransport handler that answers every request from the network body and counts."""

    def __init__(self, status: int = 200) -> None:
        self.seen: list[httpx.Request] = []
        self.status = status

    def __call__(self, request: httpx.Request) -> httpx.Response:
        self.seen.append(request)
        return httpx.Response(self.status, json=NETWORK_BODY)


async def test_a_primed_response_answers_the_exact_request_in_every_scope() -> None:
    upstream = Upstream()
    async with mock_session(upstream) as session:
        key = session.prime("GET", S2, params={"fields": "openAccessPdf"}, response=primed_answer())
        assert key == request_key("GET", S2, {"fields": "openAccessPdf"}, None, False, None)
        assert session.primed_count == 1
        async with session.scope() as one, session.scope() as two:
            for http in (session, one, two, one):
                response = await http.get(
                    S2, params={"fields": "openAccessPdf"}, rate=Rate.S2_UNKEYED
                )
                assert response.status_code == 200
                assert response.json() == S2_BODY
        assert upstream.seen == []
        assert session.requests_sent == 0


async def test_any_other_request_still_goes_to_the_network() -> None:
    upstream = Upstream()
    async with mock_session(upstream) as session:
        session.prime("GET", S2, params={"fields": "openAccessPdf"}, response=primed_answer())
        other_fields = await session.get(S2, params={"fields": "externalIds"})
        with_key = await session.get(
            S2, params={"fields": "openAccessPdf"}, headers={"x-api-key": "k"}
        )
        redirected = await session.get(
            S2, params={"fields": "openAccessPdf"}, follow_redirects=True
        )
    for response in (other_fields, with_key, redirected):
        assert response.json() == NETWORK_BODY
    assert len(upstream.seen) == 3


async def test_a_primed_failure_is_given_up_like_an_exhausted_request() -> None:
    upstream = Upstream()
    async with mock_session(upstream) as session:
        session.prime(
            "GET", S2, params={"fields": "openAccessPdf"}, failure="HTTP 429 from s2 after 3"
        )
        async with session.scope() as asking, session.scope() as bystander:
            with pytest.raises(UpstreamUnavailable) as caught:
                await asking.get(S2, params={"fields": "openAccessPdf"})
            assert isinstance(caught.value, httpx.TransportError)
            assert "HTTP 429 from s2 after 3" in str(caught.value)
            assert asking.failures == ("HTTP 429 from s2 after 3",)
            assert bystander.failures == ()
    assert upstream.seen == []


async def test_unprime_hands_the_request_back_to_the_network() -> None:
    upstream = Upstream()
    async with mock_session(upstream) as session:
        key = session.prime("GET", S2, response=primed_answer())
        assert (await session.get(S2)).json() == S2_BODY
        session.unprime([key, "not-a-key"])
        assert session.primed_count == 0
        assert (await session.get(S2)).json() == NETWORK_BODY
    assert len(upstream.seen) == 1


async def test_primed_answers_never_reach_the_persistent_cache(tmp_path: Path) -> None:
    cache = tmp_path / "cache"
    async with mock_session(Upstream(), cache=cache) as session:
        session.prime("GET", S2, response=primed_answer())
        assert (await session.get(S2)).json() == S2_BODY
    async with mock_session(Upstream(), cache=cache, offline=True) as offline:
        with pytest.raises(NotInCache):
            await offline.get(S2)


async def test_a_stored_answer_beats_a_primed_failure(tmp_path: Path) -> None:
    cache = tmp_path / "cache"
    async with mock_session(Upstream(), cache=cache) as session:
        await session.get(S2)  # stored
    upstream = Upstream()
    async with mock_session(upstream, cache=cache) as session:
        session.prime("GET", S2, failure="bulk request gave up")
        async with session.scope() as scope:
            assert (await scope.get(S2)).json() == NETWORK_BODY
            assert scope.failures == ()
    assert upstream.seen == []


async def test_a_primed_response_beats_the_store_and_offline_mode(tmp_path: Path) -> None:
    cache = tmp_path / "cache"
    async with mock_session(Upstream(), cache=cache) as session:
        await session.get(S2)  # stored: the network body
    async with mock_session(Upstream(), cache=cache, offline=True) as offline:
        offline.prime("GET", S2, response=primed_answer())
        assert (await offline.get(S2)).json() == S2_BODY


async def test_a_post_is_primed_on_its_json_body() -> None:
    upstream = Upstream()
    url = "https://api.semanticscholar.org/graph/v1/paper/batch"
    payload = {"ids": ["DOI:10.1000/abc.1", "PMID:30000001"]}
    async with mock_session(upstream) as session:
        session.prime(
            "POST",
            url,
            params={"fields": "openAccessPdf"},
            headers={"Content-Type": "application/json"},
            body=json.dumps(payload, separators=(",", ":"), sort_keys=True).encode(),
            response=primed_answer([S2_BODY, None]),
        )
        hit = await session.post(url, json=payload, params={"fields": "openAccessPdf"})
        miss = await session.post(
            url, json={"ids": ["PMID:30000001"]}, params={"fields": "openAccessPdf"}
        )
    assert hit.json() == [S2_BODY, None]
    assert miss.json() == NETWORK_BODY
    assert len(upstream.seen) == 1


async def test_primed_404s_are_answers_and_the_url_keeps_no_secret() -> None:
    url = "https://api.springernature.com/meta/v2/json"
    params = {"q": "doi:10.1007/s00000-026-00001-x", "api_key": "sekrit-meta-key"}
    async with mock_session(Upstream()) as session:
        session.prime("GET", url, params=params, response=primed_answer({"error": "x"}, 404))
        response = await session.get(url, params=params)
    assert response.status_code == 404
    assert "sekrit-meta-key" not in str(response.request.url)
    assert "sekrit-meta-key" not in repr(session)


def test_prime_takes_exactly_one_answer_and_only_deterministic_ones() -> None:
    session = mock_session(Upstream())
    with pytest.raises(ValueError, match="exactly one"):
        session.prime("GET", S2)
    with pytest.raises(ValueError, match="exactly one"):
        session.prime("GET", S2, response=primed_answer(), failure="both")
    for status in (429, 500, 503):
        with pytest.raises(ValueError, match="deterministic"):
            session.prime("GET", S2, response=primed_answer(status=status))
