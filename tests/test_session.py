"""Session lifecycle, User-Agent / contact, the scope cache rules, and POST."""

from __future__ import annotations

import asyncio
import json
from collections.abc import Callable
from pathlib import Path

import httpx
import pytest

from litfetch_df import Rate, RetryPolicy, Session, UpstreamUnavailable, __version__
from litfetch_df.session import default_user_agent
from tests.conftest import FAST_RETRY, data_json, mock_session
from tests.fake_upstream import FakeRequest, FakeResponse, FakeUpstream, json_response

UNPAYWALL = "api.unpaywall.org"
RECORD_URL = f"https://{UNPAYWALL}/v2/10.1016/j.xgen.2025.100814"
RECORD = "unpaywall_v2_10.1016_j.xgen.2025.100814_gold.json"
S2_BATCH = "https://api.semanticscholar.org/graph/v1/paper/batch"


class Counter:
    """A MockTransport handler answering a fixed status and counting calls."""

    def __init__(self, status: int = 200, **headers: str) -> None:
        self.status = status
        self.headers = headers
        self.calls: list[httpx.Request] = []

    def __call__(self, request: httpx.Request) -> httpx.Response:
        self.calls.append(request)
        return httpx.Response(
            self.status, json={"n": len(self.calls)}, headers=self.headers, request=request
        )


# -- lifecycle --------------------------------------------------------------------------------


async def test_client_raises_outside_the_context() -> None:
    s = mock_session(Counter())
    with pytest.raises(RuntimeError, match="async with"):
        _ = s.client
    async with s:
        assert isinstance(s.client, httpx.AsyncClient)
    with pytest.raises(RuntimeError):
        _ = s.client


async def test_get_outside_the_context_raises() -> None:
    with pytest.raises(RuntimeError):
        await mock_session(Counter()).get(RECORD_URL)


async def test_entering_a_scope_before_its_parent_raises() -> None:
    parent = mock_session(Counter())
    scope = parent.scope()
    with pytest.raises(RuntimeError, match="parent"):
        async with scope:
            pass


async def test_scope_exit_leaves_the_parent_client_open() -> None:
    handler = Counter()
    async with mock_session(handler) as s:
        async with s.scope() as sc:
            assert sc.client is s.client
            await sc.get(RECORD_URL)
        assert not s.client.is_closed
        assert (await s.get(RECORD_URL)).status_code == 200
    assert len(handler.calls) == 2


async def test_reentering_an_open_session_raises() -> None:
    async with mock_session(Counter()) as s:
        with pytest.raises(RuntimeError):
            await s.__aenter__()


async def test_client_factory_is_called_on_first_use_and_client_closed_on_exit() -> None:
    made: list[httpx.AsyncClient] = []

    def factory() -> httpx.AsyncClient:
        client = httpx.AsyncClient(transport=httpx.MockTransport(Counter()))
        made.append(client)
        return client

    s = Session(client_factory=factory)
    assert made == [] and not s.is_open
    async with s:
        assert s.is_open and "open" in repr(s)
        assert made == []  # nothing asked for the network yet
        await s.get("https://api.example.org/x")
        await s.get("https://api.example.org/y")
        assert made == [s.client]  # built once, then reused
    assert made[0].is_closed and not s.is_open and "closed" in repr(s)


async def test_a_run_answered_from_the_cache_never_builds_a_client(tmp_path: Path) -> None:
    counter = Counter()
    made: list[httpx.AsyncClient] = []

    def factory() -> httpx.AsyncClient:
        client = httpx.AsyncClient(transport=httpx.MockTransport(counter))
        made.append(client)
        return client

    async with Session(client_factory=factory, cache=tmp_path) as s:
        first = await s.get("https://api.example.org/x")
    assert len(made) == 1 and len(counter.calls) == 1
    async with Session(client_factory=factory, cache=tmp_path) as s:
        again = await s.get("https://api.example.org/x")
        async with s.scope() as scope:
            await scope.get("https://api.example.org/x")
    assert again.content == first.content
    assert len(made) == 1 and len(counter.calls) == 1


# -- User-Agent and contact -------------------------------------------------------------------


async def test_default_client_user_agent_with_contact() -> None:
    async with Session(contact="you@example.org") as s:
        assert (
            s.client.headers["User-Agent"] == f"litfetch_df/{__version__} (mailto:you@example.org)"
        )
        assert s.client.timeout.read == 30.0
        assert s.client.follow_redirects is False


async def test_default_client_user_agent_without_contact() -> None:
    async with Session() as s:
        assert s.client.headers["User-Agent"] == f"litfetch_df/{__version__}"
        assert s.contact is None


async def test_timeout_is_passed_to_the_default_client() -> None:
    async with Session(timeout=5.0) as s:
        assert s.client.timeout.connect == 5.0


def test_default_user_agent() -> None:
    assert default_user_agent(None) == f"litfetch_df/{__version__}"
    assert default_user_agent("a@b.org") == f"litfetch_df/{__version__} (mailto:a@b.org)"


@pytest.mark.parametrize(
    ("given", "kept"), [("  you@example.org ", "you@example.org"), ("", None), ("  ", None)]
)
def test_contact_is_trimmed(given: str, kept: str | None) -> None:
    assert Session(contact=given).contact == kept


async def test_user_agent_reaches_the_wire_and_scope_inherits_contact(fake: FakeUpstream) -> None:
    fake.route(UNPAYWALL, r"/v2/.+", json_response(data_json("json", RECORD)))
    ua = default_user_agent("you@example.org")
    factory = fake.client_factory(headers={"User-Agent": ua})
    session = Session(client_factory=factory, contact="you@example.org")
    async with session as s, s.scope() as sc:
        assert sc.contact == "you@example.org"
        await sc.get(RECORD_URL, params={"email": sc.contact or ""})
    (req,) = fake.requests(UNPAYWALL)
    assert req.headers["user-agent"] == ua
    assert req.param("email") == "you@example.org"


# -- the scope cache --------------------------------------------------------------------------


async def test_bare_session_caches_nothing() -> None:
    handler = Counter()
    async with mock_session(handler) as s:
        first = await s.get(RECORD_URL)
        second = await s.get(RECORD_URL)
    assert len(handler.calls) == 2
    assert first is not second


@pytest.mark.parametrize("status", [200, 204, 301, 302, 304, 400, 401, 403, 404, 410, 422])
async def test_scope_caches_deterministic_responses(status: int) -> None:
    handler = Counter(status)
    async with mock_session(handler) as s, s.scope() as sc:
        first = await sc.get(RECORD_URL)
        second = await sc.get(RECORD_URL)
    assert len(handler.calls) == 1
    assert second is first  # a hit returns the same response object
    assert first.status_code == status


@pytest.mark.parametrize("status", [429, 500, 502, 503, 504])
async def test_scope_never_caches_transient_statuses(status: int) -> None:
    handler = Counter(status)
    async with mock_session(handler, retry=RetryPolicy(max_attempts=1)) as s, s.scope() as sc:
        await sc.get(RECORD_URL)
        await sc.get(RECORD_URL)
    assert len(handler.calls) == 2


async def test_scope_never_caches_transport_errors() -> None:
    calls: list[httpx.Request] = []

    def handler(request: httpx.Request) -> httpx.Response:
        calls.append(request)
        if len(calls) == 1:
            raise httpx.ConnectError("refused", request=request)
        return httpx.Response(200, json={}, request=request)

    async with mock_session(handler, retry=RetryPolicy(max_attempts=1)) as s, s.scope() as sc:
        with pytest.raises(UpstreamUnavailable):
            await sc.get(RECORD_URL)
        assert len(sc.failures) == 1
        assert (await sc.get(RECORD_URL)).status_code == 200
    assert len(calls) == 2


async def test_cache_key_includes_params_headers_and_redirect_mode() -> None:
    handler = Counter()
    async with mock_session(handler) as s, s.scope() as sc:
        await sc.get(RECORD_URL, params={"email": "a@b.org", "x": 1})
        await sc.get(RECORD_URL, params={"x": 1, "email": "a@b.org"})  # same, reordered
        assert len(handler.calls) == 1
        await sc.get(RECORD_URL, params={"email": "c@d.org", "x": 1})
        assert len(handler.calls) == 2
        await sc.get(RECORD_URL, params={"x": "1", "email": "a@b.org"})  # "1" == 1 on the wire
        assert len(handler.calls) == 2
        await sc.get(RECORD_URL, params={"email": "a@b.org", "x": 1}, headers={"X-Api-Key": "k1"})
        await sc.get(RECORD_URL, params={"email": "a@b.org", "x": 1}, headers={"X-Api-Key": "k2"})
        assert len(handler.calls) == 4
        await sc.get(RECORD_URL, params={"email": "a@b.org", "x": 1}, follow_redirects=True)
        assert len(handler.calls) == 5
        await sc.get(RECORD_URL + "/other")
        assert len(handler.calls) == 6


async def test_sibling_scopes_do_not_share_a_cache() -> None:
    handler = Counter()
    async with mock_session(handler) as s:
        async with s.scope() as a, s.scope() as b:
            await a.get(RECORD_URL)
            await b.get(RECORD_URL)
            await a.get(RECORD_URL)
        assert len(handler.calls) == 2


async def test_scope_cache_dies_when_the_scope_exits() -> None:
    handler = Counter()
    async with mock_session(handler) as s:
        sc = s.scope()
        async with sc:
            await sc.get(RECORD_URL)
            await sc.get(RECORD_URL)
        assert len(handler.calls) == 1
        async with sc:  # the same scope object, entered again, starts empty
            await sc.get(RECORD_URL)
        assert len(handler.calls) == 2
        async with s.scope() as fresh:
            await fresh.get(RECORD_URL)
        assert len(handler.calls) == 3


async def test_failures_belong_to_their_scope() -> None:
    handler = Counter(503)
    async with mock_session(handler, retry=RetryPolicy(max_attempts=1)) as s:
        async with s.scope() as a:
            await a.get(RECORD_URL)
            assert len(a.failures) == 1
        async with s.scope() as b:
            assert b.failures == ()
        assert s.failures == ()


async def test_a_scope_keeps_every_failure_and_a_session_its_first_fifty() -> None:
    # Steps read a scope's failures by position, so a scope must not drop any.
    handler = Counter(503)
    async with mock_session(handler, retry=RetryPolicy(max_attempts=1)) as s:
        async with s.scope() as scope:
            for i in range(60):
                await scope.get(f"https://api.example.org/{i}")
            assert len(scope.failures) == 60
        for i in range(60):
            await s.get(f"https://api.example.org/{i}")
        assert len(s.failures) == 50


async def _rounds(n: int = 50) -> None:
    """Let every ready task run ``n`` turns of the loop (no time passes)."""
    for _ in range(n):
        await asyncio.sleep(0)


async def _until(condition: Callable[[], bool]) -> None:
    """Wait until ``condition`` holds, then a few more turns so that tasks started with the
    one it observes reach the same point (they are scheduled round-robin). Bounded, so a
    broken session fails the assertion that follows instead of hanging."""
    for _ in range(100_000):
        if condition():
            break
        await asyncio.sleep(0)
    await _rounds()


async def test_in_flight_duplicates_share_one_request() -> None:
    release = asyncio.Event()
    calls: list[httpx.Request] = []

    async def handler(request: httpx.Request) -> httpx.Response:
        calls.append(request)
        await release.wait()
        return httpx.Response(200, json={"ok": True}, request=request)

    async with mock_session(handler) as s, s.scope() as sc:  # type: ignore[arg-type]
        tasks = [asyncio.create_task(sc.get(RECORD_URL)) for _ in range(10)]
        await _until(lambda: len(calls) >= 1)
        assert len(calls) == 1
        release.set()
        responses = await asyncio.gather(*tasks)
    assert len(calls) == 1
    assert all(r is responses[0] for r in responses)


async def test_in_flight_duplicates_share_a_failure_but_do_not_cache_it() -> None:
    release = asyncio.Event()
    calls: list[httpx.Request] = []

    async def handler(request: httpx.Request) -> httpx.Response:
        calls.append(request)
        await release.wait()
        if len(calls) == 1:
            raise httpx.ConnectError("refused", request=request)
        return httpx.Response(200, json={}, request=request)

    policy = RetryPolicy(max_attempts=1)
    async with mock_session(handler, retry=policy) as s, s.scope() as sc:  # type: ignore[arg-type]
        tasks = [asyncio.create_task(sc.get(RECORD_URL)) for _ in range(3)]
        await _until(lambda: len(calls) >= 1)
        release.set()
        results = await asyncio.gather(*tasks, return_exceptions=True)
        assert all(isinstance(r, UpstreamUnavailable) for r in results)
        assert (await sc.get(RECORD_URL)).status_code == 200
    assert len(calls) == 2


async def test_cancelling_the_first_caller_does_not_cancel_its_duplicates() -> None:
    release = asyncio.Event()
    calls: list[httpx.Request] = []

    async def handler(request: httpx.Request) -> httpx.Response:
        calls.append(request)
        await release.wait()
        return httpx.Response(200, json={"n": len(calls)}, request=request)

    async with mock_session(handler) as s, s.scope() as sc:  # type: ignore[arg-type]
        owner = asyncio.create_task(sc.get(RECORD_URL))
        await _until(lambda: len(calls) >= 1)
        follower = asyncio.create_task(sc.get(RECORD_URL))
        await _rounds()
        owner.cancel()
        await _rounds()
        release.set()
        response = await asyncio.wait_for(follower, 5)
        with pytest.raises(asyncio.CancelledError):
            await owner
    assert response.status_code == 200
    assert len(calls) == 2  # the follower took the request over


async def test_scopes_over_sockets_share_client_and_cache_per_scope(fake: FakeUpstream) -> None:
    fake.route(UNPAYWALL, r"/v2/.+", json_response(data_json("json", RECORD)))
    async with Session(client_factory=fake.client_factory(), retry=FAST_RETRY) as s:
        for _ in range(3):  # three units of work, each asking twice
            async with s.scope() as sc:
                a = await sc.get(RECORD_URL, params={"email": "a@b.org"})
                b = await sc.get(RECORD_URL, params={"email": "a@b.org"})
                assert a is b and a.json()["oa_status"] == "gold"
    assert fake.count(UNPAYWALL) == 3


# -- POST -------------------------------------------------------------------------------------


def _s2_batch(req: FakeRequest) -> FakeResponse:
    ids = req.json()["ids"]
    return json_response(
        [{"paperId": f"p{i}", "externalIds": {"DOI": d}} for i, d in enumerate(ids)]
    )


async def test_post_sends_json_and_is_cached_in_a_scope_keyed_on_body(fake: FakeUpstream) -> None:
    fake.route("api.semanticscholar.org", r"/graph/v1/paper/batch", _s2_batch, method="POST")
    body1 = {"ids": ["DOI:10.1000/a", "DOI:10.1000/b"]}
    body2 = {"ids": ["DOI:10.1000/c"]}
    async with Session(client_factory=fake.client_factory(), retry=FAST_RETRY) as s:
        async with s.scope() as sc:
            r1 = await sc.post(S2_BATCH, json=body1, params={"fields": "externalIds"})
            r1b = await sc.post(S2_BATCH, json=body1, params={"fields": "externalIds"})
            r2 = await sc.post(S2_BATCH, json=body2, params={"fields": "externalIds"})
        assert r1 is r1b
        assert [p["externalIds"]["DOI"] for p in r1.json()] == ["DOI:10.1000/a", "DOI:10.1000/b"]
        assert len(r2.json()) == 1
        await s.post(S2_BATCH, json=body1)  # a bare session does not cache
        await s.post(S2_BATCH, json=body1)
    reqs = fake.requests("api.semanticscholar.org")
    assert len(reqs) == 4
    assert all(r.method == "POST" for r in reqs)
    assert reqs[0].json() == body1 and reqs[1].json() == body2
    assert reqs[0].headers["content-type"] == "application/json"
    assert reqs[0].param("fields") == "externalIds"


async def test_post_is_retried(fake: FakeUpstream) -> None:
    fake.route("api.semanticscholar.org", r"/graph/v1/paper/batch", _s2_batch, method="POST")
    fake.fail_next(
        "api.semanticscholar.org", "/graph/v1/paper/batch", FakeResponse(503, "busy"), "drop"
    )
    async with Session(client_factory=fake.client_factory(), retry=FAST_RETRY) as s:
        response = await s.post(S2_BATCH, json={"ids": ["DOI:10.1000/a"]})
    assert response.status_code == 200
    reqs = fake.requests("api.semanticscholar.org")
    assert len(reqs) == 3
    assert all(json.loads(r.body) == {"ids": ["DOI:10.1000/a"]} for r in reqs)


async def test_post_does_not_cache_transient_failures() -> None:
    handler = Counter(500)
    async with mock_session(handler, retry=RetryPolicy(max_attempts=1)) as s, s.scope() as sc:
        await sc.post(S2_BATCH, json={"ids": []})
        await sc.post(S2_BATCH, json={"ids": []})
    assert len(handler.calls) == 2


async def test_get_and_post_to_one_url_are_different_cache_entries() -> None:
    handler = Counter()
    async with mock_session(handler) as s, s.scope() as sc:
        await sc.get(S2_BATCH)
        await sc.post(S2_BATCH, json=None)
    assert [c.method for c in handler.calls] == ["GET", "POST"]


async def test_openalex_403_is_retried_and_never_cached_in_a_scope() -> None:
    """OpenAlex uses 403 for "slow down": it is transient, so a scope must not keep it."""
    statuses = iter([403, 403, 403, 200])
    calls: list[str] = []

    def handler(request: httpx.Request) -> httpx.Response:
        calls.append(str(request.url))
        return httpx.Response(next(statuses), json={})

    async with mock_session(handler) as session, session.scope() as scope:
        first = await scope.get("https://api.openalex.org/works", rate=Rate.OPENALEX)
        assert first.status_code == 403
        assert len(calls) == 3  # retried like a 429
        assert scope.failures
        second = await scope.get("https://api.openalex.org/works", rate=Rate.OPENALEX)
        assert second.status_code == 200
        assert len(calls) == 4  # the 403 was not served from the scope cache


async def test_403_from_other_hosts_is_final_and_cached() -> None:
    calls: list[str] = []

    def handler(request: httpx.Request) -> httpx.Response:
        calls.append(str(request.url))
        return httpx.Response(403)

    async with mock_session(handler) as session, session.scope() as scope:
        assert (await scope.get("https://api.crossref.org/works/x")).status_code == 403
        assert (await scope.get("https://api.crossref.org/works/x")).status_code == 403
        assert len(calls) == 1


@pytest.mark.refuses_network
async def test_the_test_suite_refuses_the_network(monkeypatch: pytest.MonkeyPatch) -> None:
    """The autouse guard in conftest: a default client cannot leave this machine."""
    import httpcore

    from tests.conftest import NetworkRefused

    async def no_socket(self: object, request: object) -> object:
        raise AssertionError("the request got past the guard to the connection pool")

    # Belt and braces: should the guard ever break, this test fails here, before any
    # name lookup or socket, instead of reaching the real host below.
    monkeypatch.setattr(httpcore.AsyncConnectionPool, "handle_async_request", no_socket)
    async with Session(retry=RetryPolicy(max_attempts=1)) as s:
        with pytest.raises(NetworkRefused):
            await s.get("https://api.crossref.org/works/10.1000/x")
