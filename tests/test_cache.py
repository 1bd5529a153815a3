"""The persistent response cache, through the Session surface (MockTransport, tmp files)."""

from __future__ import annotations

import asyncio
import hashlib
import json
import math
import os
import random
import signal
import sqlite3
import subprocess
import sys
import textwrap
import threading
import time
from pathlib import Path
from urllib.parse import quote

import httpx
import pytest

from litfetch_df import NotInCache, Session, UpstreamUnavailable
from litfetch_df.session import CachedResponse
from litfetch_df.store.cache import DEFAULT_TTL, CacheInfo, ResponseCache, open_cache
from tests.conftest import data_bytes, data_json, mock_session

EPMC = "https://www.ebi.ac.uk/europepmc/webservices/rest/PMC7000001/fullTextXML"
UNPAYWALL = "https://api.unpaywall.org/v2/10.1000/cache.1"
S2 = "https://api.semanticscholar.org/graph/v1/paper/DOI:10.1000/cache.1"
SPRINGER_META = "https://api.springernature.com/meta/v2/json"
ELSEVIER = "https://api.elsevier.com/content/article/doi/10.1000/cache.1"
REDIRECT = "https://link.springer.com/content/pdf/10.1000/cache.1.pdf"

JATS = data_bytes("jats", "PMC5608867_license-prose-only.xml")
S2_404 = data_bytes("json", "s2_graph_paper_DOI_10.1101_2024.04.01.587366_404.json")


class Upstream:
    """A MockTransport handler whose answers can change, counting every call."""

    def __init__(self) -> None:
        self.calls: list[httpx.Request] = []
        self.version = 1

    def __call__(self, request: httpx.Request) -> httpx.Response:
        self.calls.append(request)
        url = str(request.url)
        if url.startswith(EPMC):
            body = JATS.replace(b"</article>", f"<!-- v{self.version} --></article>".encode())
            return httpx.Response(200, content=body, headers={"content-type": "application/xml"})
        if url.startswith(S2):
            return httpx.Response(404, content=S2_404, headers={"content-type": "application/json"})
        if url.startswith(REDIRECT):
            return httpx.Response(
                301, headers={"location": "https://link.springer.com/pdfs/cache.1.pdf"}
            )
        if url.startswith(UNPAYWALL):
            status = int(request.url.params.get("status", "200"))
            payload = data_json("json", "unpaywall_v2_10.1016_j.xgen.2025.100814_gold.json")
            return httpx.Response(status, json=payload)
        return httpx.Response(404, json={"error": "unknown"})

    def count(self, prefix: str) -> int:
        return sum(1 for r in self.calls if str(r.url).startswith(prefix))


def _close(session: Session) -> None:
    store = session.store
    if isinstance(store, ResponseCache):
        store.close()


class Clock:
    """A settable wall clock for TTL tests."""

    def __init__(self) -> None:
        self.now = 1_700_000_000.0

    def __call__(self) -> float:
        return self.now


# -- hits and misses by rule -------------------------------------------------------------------


@pytest.mark.parametrize(
    ("url", "status"),
    [(EPMC, 200), (S2, 404), (REDIRECT, 301)],
    ids=["200-jats", "404-s2", "301-redirect"],
)
async def test_deterministic_response_is_served_by_a_second_session(
    tmp_path: Path, url: str, status: int
) -> None:
    upstream = Upstream()
    async with mock_session(upstream, cache=tmp_path) as first:
        live = await first.get(url)
    _close(first)
    assert live.status_code == status
    assert len(upstream.calls) == 1

    async with mock_session(upstream, cache=tmp_path) as second:
        replay = await second.get(url)
        assert second.requests_sent == 0
    _close(second)
    assert len(upstream.calls) == 1
    assert replay.status_code == status
    assert replay.content == live.content
    assert replay.headers.get("content-type") == live.headers.get("content-type")
    assert replay.headers.get("location") == live.headers.get("location")
    assert str(replay.url) == str(live.url)


@pytest.mark.parametrize("status", [429, 500, 503])
async def test_transient_status_is_never_stored(tmp_path: Path, status: int) -> None:
    upstream = Upstream()
    params: dict[str, str | int] = {"email": "someone@example.org", "status": status}
    async with mock_session(upstream, cache=tmp_path) as first:
        response = await first.get(UNPAYWALL, params=params)
    _close(first)
    assert response.status_code == status
    attempts = len(upstream.calls)
    assert attempts == 3  # FAST_RETRY retried it

    async with mock_session(upstream, cache=tmp_path) as second:
        again = await second.get(UNPAYWALL, params=params)
    _close(second)
    assert again.status_code == status
    assert len(upstream.calls) == 2 * attempts

    async with mock_session(upstream, cache=tmp_path, offline=True) as offline:
        with pytest.raises(NotInCache):
            await offline.get(UNPAYWALL, params=params)
    _close(offline)
    with ResponseCache(tmp_path) as cache:
        assert cache.info().entries == 0


async def test_transport_error_is_never_stored(tmp_path: Path) -> None:
    calls = 0

    def down(request: httpx.Request) -> httpx.Response:
        nonlocal calls
        calls += 1
        raise httpx.ConnectError("connection refused", request=request)

    async with mock_session(down, cache=tmp_path) as first:
        with pytest.raises(UpstreamUnavailable):
            await first.get(EPMC)
    _close(first)
    async with mock_session(down, cache=tmp_path, offline=True) as offline:
        with pytest.raises(NotInCache):
            await offline.get(EPMC)
    _close(offline)
    assert calls == 3
    with ResponseCache(tmp_path) as cache:
        assert cache.info().entries == 0


async def test_requests_differing_in_params_or_method_are_different_entries(
    tmp_path: Path,
) -> None:
    upstream = Upstream()
    async with mock_session(upstream, cache=tmp_path) as s:
        await s.get(UNPAYWALL, params={"email": "a@example.org"})
        await s.get(UNPAYWALL, params={"email": "b@example.org"})
        await s.post(UNPAYWALL, json={"ids": ["10.1000/cache.1"]})
        await s.get(UNPAYWALL, params={"email": "a@example.org"})
    _close(s)
    assert len(upstream.calls) == 3
    with ResponseCache(tmp_path) as cache:
        assert cache.info().entries == 3


# -- TTL ---------------------------------------------------------------------------------------


async def test_expired_entry_is_a_miss_and_is_refetched(tmp_path: Path) -> None:
    upstream = Upstream()
    clock = Clock()
    cache = ResponseCache(tmp_path, ttl=60, clock=clock)
    async with mock_session(upstream, cache=cache) as s:
        await s.get(EPMC)
        clock.now += 59
        await s.get(EPMC)
        assert upstream.count(EPMC) == 1
        assert cache.info().expired == 0

        clock.now += 2
        assert cache.info().expired == 1
        upstream.version = 2
        fresh = await s.get(EPMC)
        assert upstream.count(EPMC) == 2
        assert b"<!-- v2 -->" in fresh.content

        # The refetch replaced the entry and restarted its clock.
        clock.now += 30
        again = await s.get(EPMC)
        assert upstream.count(EPMC) == 2
        assert again.content == fresh.content
    cache.close()


async def test_ttl_is_judged_by_the_reader(tmp_path: Path) -> None:
    upstream = Upstream()
    clock = Clock()
    with ResponseCache(tmp_path, ttl=60, clock=clock) as short:
        async with mock_session(upstream, cache=short) as s:
            await s.get(EPMC)
    clock.now += 10 * 365 * 86400
    with ResponseCache(tmp_path, ttl=math.inf, clock=clock) as forever:
        assert forever.info().expired == 0
        async with mock_session(upstream, cache=forever, offline=True) as s:
            replay = await s.get(EPMC)
    assert replay.status_code == 200
    with ResponseCache(tmp_path, ttl=60, clock=clock) as short:
        async with mock_session(upstream, cache=short, offline=True) as s:
            with pytest.raises(NotInCache):
                await s.get(EPMC)
    assert upstream.count(EPMC) == 1


def test_session_cache_ttl_reaches_the_cache(tmp_path: Path) -> None:
    default = mock_session(Upstream(), cache=tmp_path)
    chosen = mock_session(Upstream(), cache=tmp_path, cache_ttl=3600)
    forever = mock_session(Upstream(), cache=tmp_path, cache_ttl=math.inf)
    stores = [default.store, chosen.store, forever.store]
    assert all(isinstance(store, ResponseCache) for store in stores)
    assert [store.ttl for store in stores if isinstance(store, ResponseCache)] == [
        DEFAULT_TTL,
        3600,
        math.inf,
    ]
    assert DEFAULT_TTL == 30 * 86400
    for session in (default, chosen, forever):
        _close(session)


@pytest.mark.parametrize("ttl", [0, -1, math.nan])
def test_nonsensical_ttl_is_refused(tmp_path: Path, ttl: float) -> None:
    with pytest.raises(ValueError, match="ttl"):
        mock_session(Upstream(), cache=tmp_path, cache_ttl=ttl)


# -- refresh and offline -----------------------------------------------------------------------


async def test_refresh_refetches_and_overwrites(tmp_path: Path) -> None:
    upstream = Upstream()
    async with mock_session(upstream, cache=tmp_path) as s:
        await s.get(EPMC)
    _close(s)
    upstream.version = 2
    async with mock_session(upstream, cache=tmp_path, refresh=True) as s:
        refreshed = await s.get(EPMC)
    _close(s)
    assert upstream.count(EPMC) == 2
    assert b"<!-- v2 -->" in refreshed.content

    async with mock_session(upstream, cache=tmp_path) as s:
        replay = await s.get(EPMC)
    _close(s)
    assert upstream.count(EPMC) == 2
    assert replay.content == refreshed.content
    with ResponseCache(tmp_path) as cache:
        assert cache.info().entries == 1


async def test_offline_replays_a_recorded_run_and_reports_misses(tmp_path: Path) -> None:
    upstream = Upstream()
    recorded = [
        (EPMC, None),
        (S2, None),
        (REDIRECT, None),
        (UNPAYWALL, {"email": "someone@example.org"}),
    ]
    async with mock_session(upstream, cache=tmp_path) as s:
        live = [await s.get(url, params=params) for url, params in recorded]
    _close(s)
    sent = len(upstream.calls)

    async with mock_session(upstream, cache=tmp_path, offline=True) as s:
        assert s.offline
        replayed = [await s.get(url, params=params) for url, params in recorded]
        with pytest.raises(NotInCache, match="not in cache") as missing:
            await s.get(UNPAYWALL, params={"email": "other@example.org"})
        async with s.scope() as scope:
            with pytest.raises(NotInCache):
                await scope.get(ELSEVIER)
            assert any("not in cache" in reason for reason in scope.failures)
        assert s.requests_sent == 0
    _close(s)
    assert len(upstream.calls) == sent
    assert isinstance(missing.value, httpx.TransportError)
    for a, b in zip(live, replayed, strict=True):
        assert (a.status_code, a.content, str(a.url)) == (b.status_code, b.content, str(b.url))
        assert a.headers.get("content-type") == b.headers.get("content-type")


def test_offline_needs_a_cache() -> None:
    with pytest.raises(ValueError, match="offline"):
        mock_session(Upstream(), offline=True)


# -- secrets -----------------------------------------------------------------------------------

SPRINGER_KEY = "spr1ngerKEY-0123456789abcdef"
ELSEVIER_KEY = "e1sevierKEY-fedcba9876543210"
S2_KEY = "s2KEY+with/odd=chars-42"
ECHOED = "this-text-is-stored-in-clear"


def _echo(request: httpx.Request) -> httpx.Response:
    """Upstreams that echo the caller's key back, in the body and in headers."""
    url = str(request.url)
    if url.startswith(SPRINGER_META):
        key = request.url.params["api_key"]
        body = {
            "apiMessage": "This JSON was provided by Springer Nature",
            "query": request.url.params["q"],
            "apiKey": key,
            "result": [{"total": "1", "start": "1", "pageLength": "10"}],
            "records": [{"doi": "10.1000/cache.1", "note": ECHOED}],
        }
        return httpx.Response(200, json=body, headers={"x-echo-key": key})
    if url.startswith(ELSEVIER):
        key = request.headers["x-els-apikey"]
        xml = f"<full-text-retrieval-response><key>{key}</key><note>{ECHOED}</note>"
        xml += "<p>" + "lorem ipsum " * 400 + "</p></full-text-retrieval-response>"
        return httpx.Response(
            200,
            text=xml,
            headers={"content-type": "text/xml", "x-els-apikey": key, "x-els-status": "OK"},
        )
    if url.startswith(S2):
        key = request.headers["x-api-key"]
        encoded = quote(key, safe="")
        text = json.dumps({"error": f"key {key} or {encoded} unknown", "note": ECHOED})
        return httpx.Response(403, text=text, headers={"x-api-key": key})
    return httpx.Response(404)


async def test_no_secret_reaches_the_cache_file(tmp_path: Path) -> None:
    db = tmp_path / "cache.sqlite3"
    async with mock_session(_echo, cache=db) as s:
        springer = await s.get(
            SPRINGER_META, params={"q": "doi:10.1000/cache.1", "api_key": SPRINGER_KEY}
        )
        elsevier = await s.get(ELSEVIER, headers={"X-ELS-APIKey": ELSEVIER_KEY})
        s2 = await s.get(S2, headers={"x-api-key": S2_KEY})
    assert SPRINGER_KEY.encode() in springer.content  # the live answer is untouched
    assert ELSEVIER_KEY.encode() in elsevier.content
    assert s2.status_code == 403

    # The session keeps its connections open: the WAL file still holds the new pages.
    raw = db.read_bytes()
    wal = Path(f"{db}-wal")
    if wal.exists():
        raw += wal.read_bytes()
    assert ECHOED.encode() in raw  # the grep can see stored text
    for secret in (SPRINGER_KEY, ELSEVIER_KEY, S2_KEY, quote(S2_KEY, safe="")):
        assert secret.encode() not in raw
    _close(s)

    async with mock_session(_echo, cache=db, offline=True) as s:
        replays = [
            await s.get(
                SPRINGER_META, params={"q": "doi:10.1000/cache.1", "api_key": SPRINGER_KEY}
            ),
            await s.get(ELSEVIER, headers={"X-ELS-APIKey": ELSEVIER_KEY}),
            await s.get(S2, headers={"x-api-key": S2_KEY}),
        ]
    _close(s)
    assert replays[0].json()["apiKey"] == "REDACTED"
    assert b"<key>REDACTED</key>" in replays[1].content
    assert replays[1].headers.get("x-els-status") == "OK"
    assert replays[2].status_code == 403
    for replay in replays:
        stored = replay.content + str(replay.url).encode() + repr(replay.headers).encode()
        for secret in (SPRINGER_KEY, ELSEVIER_KEY, S2_KEY, quote(S2_KEY, safe="")):
            assert secret.encode() not in stored
        assert "x-api-key" not in replay.headers
        assert "x-els-apikey" not in replay.headers
    assert "api_key=REDACTED" in str(replays[0].url)
    assert replays[0].headers["x-echo-key"] == "REDACTED"


async def test_entry_echoing_a_too_short_secret_is_not_stored(tmp_path: Path) -> None:
    async with mock_session(_echo, cache=tmp_path) as s:
        await s.get(SPRINGER_META, params={"q": "doi:10.1000/cache.1", "api_key": "k1"})
        await s.get(SPRINGER_META, params={"q": "doi:10.1000/cache.1"} | {"api_key": "zz9"})
    _close(s)
    with ResponseCache(tmp_path) as cache:
        assert cache.info().entries == 0


def test_save_drops_credential_headers_and_hashes_raw_keys(tmp_path: Path) -> None:
    # The store's own guard, for callers other than the Session (which filters first).
    token = "Bearer tok-0123456789abcdef"
    entry = CachedResponse(
        status_code=200,
        headers=(
            ("content-type", "application/json"),
            ("authorization", token),
            ("x-api-key", S2_KEY),
            ("set-cookie", "session=abcdef0123456789"),
            ("x-request-echo", f"api_key={SPRINGER_KEY}"),
        ),
        content=json.dumps({"note": ECHOED, "token": token}).encode(),
        url=f"{SPRINGER_META}?q=doi:10.1000/cache.1&api_key={SPRINGER_KEY}",
    )
    raw_key = f"GET {SPRINGER_META}?api_key={SPRINGER_KEY}"
    db = tmp_path / "direct.sqlite3"
    with ResponseCache(db) as cache:
        cache.save(raw_key, entry, secrets=[token])
        loaded = cache.load(raw_key)
        raw = db.read_bytes() + Path(f"{db}-wal").read_bytes()
    assert loaded is not None
    assert dict(loaded.headers) == {
        "content-type": "application/json",
        "x-request-echo": "api_key=REDACTED",
    }
    assert json.loads(loaded.content) == {"note": ECHOED, "token": "REDACTED"}
    assert loaded.url == f"{SPRINGER_META}?q=doi:10.1000/cache.1&api_key=REDACTED"
    assert ECHOED.encode() in raw
    for secret in (SPRINGER_KEY, S2_KEY, token, "abcdef0123456789"):
        assert secret.encode() not in raw


def test_repr_names_path_and_ttl_only(tmp_path: Path) -> None:
    with ResponseCache(tmp_path / "c.db", ttl=86400) as cache:
        assert repr(cache) == f"<litfetch_df.ResponseCache path='{tmp_path / 'c.db'}' ttl=1d>"


# -- concurrency and crash safety --------------------------------------------------------------

_WRITER = textwrap.dedent(
    """
    import asyncio, logging, sys, time
    from pathlib import Path

    import httpx
    from litfetch_df import Session

    cache, tag, count, go = sys.argv[1], sys.argv[2], int(sys.argv[3]), Path(sys.argv[4])
    warnings = []

    class Keep(logging.Handler):
        def emit(self, record):
            warnings.append(record.getMessage())

    logging.getLogger("litfetch_df").addHandler(Keep(level=logging.WARNING))

    def handler(request):
        n = request.url.params["n"]
        return httpx.Response(200, content=f"<record tag='{tag}' n='{n}'/>".encode() * 40)

    def factory():
        return httpx.AsyncClient(transport=httpx.MockTransport(handler))

    async def main():
        print("ready", flush=True)
        while not go.exists():
            time.sleep(0.005)
        async with Session(client_factory=factory, cache=cache) as s:
            for n in range(count):
                await s.get(f"https://www.ebi.ac.uk/{tag}", params={"n": n})
        assert not warnings, warnings

    asyncio.run(main())
    """
)


async def test_two_processes_write_one_cache(tmp_path: Path) -> None:
    script = tmp_path / "writer.py"
    script.write_text(_WRITER)
    db = tmp_path / "shared" / "responses.sqlite3"
    go = tmp_path / "go"
    count = 300
    procs = [
        subprocess.Popen(
            [sys.executable, str(script), str(db), tag, str(count), str(go)],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        for tag in ("alpha", "beta")
    ]
    try:
        for proc in procs:
            assert proc.stdout is not None
            assert proc.stdout.readline().strip() == "ready"
        go.touch()  # both start on a file that does not exist yet
        results = [proc.communicate(timeout=60) for proc in procs]
    finally:
        for proc in procs:
            if proc.poll() is None:
                proc.kill()
                proc.wait()
    for proc, (_, err) in zip(procs, results, strict=True):
        assert proc.returncode == 0, err
        assert "locked" not in err

    def offline_handler(request: httpx.Request) -> httpx.Response:
        raise AssertionError(f"network request in offline mode: {request.url}")

    async with mock_session(offline_handler, cache=db, offline=True) as s:
        for tag in ("alpha", "beta"):
            for n in range(count):
                response = await s.get(f"https://www.ebi.ac.uk/{tag}", params={"n": n})
                assert response.content == f"<record tag='{tag}' n='{n}'/>".encode() * 40
    _close(s)
    with ResponseCache(db) as cache:
        assert cache.info().entries == 2 * count


_KILLED = textwrap.dedent(
    """
    import asyncio, hashlib, sys

    import httpx
    from litfetch_df import Session

    # Incompressible, so every entry is a 1 MiB write: most of the writer's time is spent
    # inside a write, where the kill should land.
    BLOCK = hashlib.shake_256(b"block").digest(1024 * 1024)

    def handler(request):
        return httpx.Response(200, content=request.url.params["n"].encode() + BLOCK)

    def factory():
        return httpx.AsyncClient(transport=httpx.MockTransport(handler))

    async def main():
        async with Session(client_factory=factory, cache=sys.argv[1]) as s:
            for n in range(100_000):
                await s.get("https://europepmc.org/api/fulltextRepo", params={"n": n})
                print(n, s.requests_sent, flush=True)

    asyncio.run(main())
    """
)
_BLOCK = hashlib.shake_256(b"block").digest(1024 * 1024)


def _kill_writer_mid_run(script: Path, db: Path, *, after: int, finished: int) -> int:
    """Run the writer; SIGKILL it at a random moment once it reported entry ``after``.

    The first ``finished`` entries were stored by earlier runs: resuming must cost no
    upstream request for them.
    """
    proc = subprocess.Popen(
        [sys.executable, str(script), str(db)],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        assert proc.stdout is not None
        done = -1
        while done < after:
            line = proc.stdout.readline()
            assert line, proc.stderr.read() if proc.stderr else "writer exited"
            done, sent = map(int, line.split())
            if done < finished:
                assert sent == 0, f"entry {done} was fetched again"
        time.sleep(random.uniform(0, 0.01))
        os.kill(proc.pid, signal.SIGKILL)
        proc.wait(timeout=10)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
        for stream in (proc.stdout, proc.stderr):
            if stream is not None:
                stream.close()
    assert proc.returncode == -signal.SIGKILL
    return done


async def test_writers_killed_mid_run_leave_only_whole_entries(tmp_path: Path) -> None:
    script = tmp_path / "killed.py"
    script.write_text(_KILLED)
    db = tmp_path / "killed.sqlite3"
    entries = 0
    # Each run resumes the last one (its finished entries come from the cache) and is
    # killed at a random moment; after every kill the file must hold whole entries only.
    for _ in range(6):
        done = _kill_writer_mid_run(script, db, after=entries + 3, finished=entries)

        check = sqlite3.connect(db)
        try:
            assert check.execute("PRAGMA integrity_check").fetchone() == ("ok",)
        finally:
            check.close()
        with ResponseCache(db) as cache:
            entries = cache.info().entries
        assert entries > done  # everything reported finished survived the kill

        served = 0
        async with mock_session(Upstream(), cache=db, offline=True) as s:
            for n in range(entries + 5):
                try:
                    response = await s.get(
                        "https://europepmc.org/api/fulltextRepo", params={"n": n}
                    )
                except NotInCache:
                    continue
                served += 1
                assert response.content == str(n).encode() + _BLOCK
        _close(s)
        assert served == entries


async def test_many_tasks_share_one_cached_session(tmp_path: Path) -> None:
    upstream = Upstream()

    def handler(request: httpx.Request) -> httpx.Response:
        upstream.calls.append(request)
        doi = request.url.path.rsplit("/", 2)[-2:]
        return httpx.Response(200, json={"doi": "/".join(doi), "is_oa": True})

    urls = [f"https://api.unpaywall.org/v2/10.1000/task.{i}" for i in range(150)]
    async with mock_session(handler, cache=tmp_path) as s:
        responses = await asyncio.gather(*(s.get(url) for url in urls * 2))
    _close(s)
    for url, response in zip(urls * 2, responses, strict=True):
        assert response.json()["doi"] == url.split("/v2/")[1]

    sent = len(upstream.calls)
    async with mock_session(handler, cache=tmp_path, offline=True) as s:
        replays = await asyncio.gather(*(s.get(url) for url in urls))
    _close(s)
    assert len(upstream.calls) == sent
    assert [r.json()["doi"] for r in replays] == [u.split("/v2/")[1] for u in urls]


def test_one_cache_serves_sessions_in_several_threads(tmp_path: Path) -> None:
    cache = ResponseCache(tmp_path)
    errors: list[BaseException] = []

    def handler(request: httpx.Request) -> httpx.Response:
        return httpx.Response(200, content=request.url.path.encode())

    def run(tag: str) -> None:
        async def work() -> None:
            async with mock_session(handler, cache=cache) as s:
                for i in range(100):
                    await s.get(f"https://www.ebi.ac.uk/{tag}/{i}")

        try:
            asyncio.run(work())
        except BaseException as exc:
            errors.append(exc)

    threads = [threading.Thread(target=run, args=(f"t{i}",)) for i in range(4)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=60)
    assert errors == []
    assert cache.info().entries == 400

    async def replay() -> list[bytes]:
        async with mock_session(handler, cache=cache, offline=True) as s:
            return [(await s.get(f"https://www.ebi.ac.uk/t3/{i}")).content for i in range(100)]

    assert asyncio.run(replay()) == [f"/t3/{i}".encode() for i in range(100)]
    cache.close()


@pytest.mark.skipif(not hasattr(os, "fork"), reason="needs fork()")
def test_a_forked_child_uses_its_own_connection(tmp_path: Path) -> None:
    entry = CachedResponse(200, (("content-type", "text/plain"),), b"from the parent", EPMC)
    with ResponseCache(tmp_path) as cache:
        cache.save("a" * 64, entry)  # the parent's connection exists before the fork
        pid = os.fork()
        if pid == 0:  # pragma: no cover - the child reports through its exit status
            ok = False
            try:
                child = CachedResponse(200, (), b"from the child", EPMC)
                cache.save("b" * 64, child)
                loaded = cache.load("a" * 64)
                ok = loaded is not None and loaded.content == b"from the parent"
            finally:
                os._exit(0 if ok else 1)
        _, status = os.waitpid(pid, 0)
        assert os.waitstatus_to_exitcode(status) == 0
        from_child = cache.load("b" * 64)
        assert from_child is not None and from_child.content == b"from the child"
        cache.save("c" * 64, entry)
        assert cache.info().entries == 3


# -- info, clear, paths ------------------------------------------------------------------------


async def test_info_and_clear(tmp_path: Path) -> None:
    upstream = Upstream()
    clock = Clock()
    cache = ResponseCache(tmp_path, ttl=3600, clock=clock)
    empty = cache.info()
    assert (empty.entries, empty.expired, empty.oldest, empty.newest) == (0, 0, None, None)

    async with mock_session(upstream, cache=cache) as s:
        await s.get(EPMC)
        clock.now += 1800
        await s.get(S2)
        await s.get(REDIRECT)
        clock.now += 1801  # the first entry is now past its TTL

        info = cache.info()
        assert isinstance(info, CacheInfo)
        assert info.path == tmp_path / "responses.sqlite3"
        assert (info.entries, info.expired, info.ttl) == (3, 1, 3600)
        assert info.bytes > len(JATS) // 10
        assert info.oldest is not None and info.newest is not None
        assert (info.newest - info.oldest).total_seconds() == pytest.approx(1800)
        assert info.oldest.timestamp() == pytest.approx(1_700_000_000.0)

        assert cache.clear(expired_only=True) == 1
        assert cache.info().entries == 2
        await s.get(S2)
        assert upstream.count(S2) == 1

        assert cache.clear() == 2
        assert cache.info().entries == 0
        await s.get(S2)
        assert upstream.count(S2) == 2
    assert cache.clear(expired_only=True) == 0
    cache.close()


def test_paths_directory_file_and_reopening(tmp_path: Path) -> None:
    nested = tmp_path / "a" / "b"
    with ResponseCache(nested) as cache:
        assert cache.path == nested / "responses.sqlite3"
    assert nested.is_dir()

    explicit = tmp_path / "x" / "mine.db"
    with ResponseCache(explicit) as cache:
        assert cache.path == explicit
    assert explicit.is_file()

    with ResponseCache(str(tmp_path / "a" / "b")) as again:
        assert again.path == nested / "responses.sqlite3"

    existing = tmp_path / "plain"
    existing.write_bytes(b"")
    with ResponseCache(existing) as cache:
        assert cache.path == existing
        assert cache.info().entries == 0

    foreign = tmp_path / "notes.txt"
    foreign.write_text("not a database, " * 100)
    with pytest.raises(ValueError, match="not a usable response cache"):
        ResponseCache(foreign)
    assert foreign.read_text() == "not a database, " * 100


async def test_a_closed_cache_reopens_on_use(tmp_path: Path) -> None:
    upstream = Upstream()
    cache = ResponseCache(tmp_path)
    async with mock_session(upstream, cache=cache) as s:
        await s.get(EPMC)
        cache.close()
        await s.get(EPMC)
        await s.get(S2)
    assert len(upstream.calls) == 2
    assert cache.info().entries == 2
    cache.close()


def test_open_cache(tmp_path: Path) -> None:
    assert open_cache(None) is None
    assert open_cache(False) is None
    with ResponseCache(tmp_path) as cache:
        assert open_cache(cache) is cache
    opened = open_cache(tmp_path / "c.sqlite3", ttl=60)
    assert isinstance(opened, ResponseCache)
    assert opened.ttl == 60
    opened.close()
    with pytest.raises(TypeError):
        open_cache(42)


async def test_a_replayed_response_still_knows_its_redacted_request(tmp_path: Path) -> None:
    def handler(request: httpx.Request) -> httpx.Response:
        return httpx.Response(200, json={"ok": True})

    url = "https://api.springernature.com/meta/v2/json"
    params = {"q": "doi:10.1000/x", "api_key": "sekrit-meta-key-123"}
    async with mock_session(handler, cache=tmp_path) as s:
        await s.get(url, params=params)
    async with mock_session(handler, cache=tmp_path, offline=True) as s:
        replayed = await s.get(url, params=params)
    assert replayed.json() == {"ok": True}
    assert replayed.request.method == "GET"
    assert replayed.url.host == "api.springernature.com"
    assert "sekrit" not in str(replayed.url)


def test_a_cache_directory_created_meanwhile_by_another_process_is_used_as_a_directory(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Dask workers open one cache directory at once: the first check sees no directory,
    # another worker creates it, the next check sees it exist. The file inside it is used,
    # never the directory itself ("unable to open database file").
    target = tmp_path / "shared-cache"
    real_is_dir = Path.is_dir
    first = {"call": True}

    def racing_is_dir(self: Path) -> bool:
        if self == target and first["call"]:
            first["call"] = False
            target.mkdir()  # the other worker wins the race right here
            return False
        return real_is_dir(self)

    monkeypatch.setattr(Path, "is_dir", racing_is_dir)
    cache = ResponseCache(target)
    try:
        assert cache.path == target / "responses.sqlite3"
        assert cache.path.is_file()
    finally:
        cache.close()
