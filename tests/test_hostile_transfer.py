"""A hostile or broken server, one request at a time (issue 26, items 1, 2, 4, 7).

Through the public surface (:meth:`Session.get`, :meth:`Session.download_to`,
``Session(cache=...)``), against servers on 127.0.0.1: the raw-socket
:class:`~tests.raw_server.RawServer` where the bytes on the wire matter, an
``httpx.MockTransport`` where they do not. Names that must resolve to a
private address go through a fake resolver (``socket.getaddrinfo``): nothing
leaves the machine. No wall clock anywhere.
"""

from __future__ import annotations

import gzip
import hashlib
import re
import socket
import sqlite3
import zlib
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import httpcore
import httpx
import pytest

from litfetch_df import RetryPolicy, Session
from litfetch_df.session import NotInCache
from litfetch_df.wire.http import UpstreamUnavailable
from litfetch_df.wire.transfer import DEFAULT_MAX_BODY_BYTES, DEFAULT_MAX_JSON_BYTES
from tests import conftest
from tests.conftest import FAST_RETRY, mock_session
from tests.raw_server import RawServer, http_answer

ONCE = RetryPolicy(max_attempts=1, base_delay=0.0, max_delay=0.0)


def _gzip_gzip_bomb(decoded: int) -> bytes:
    """``decoded`` zero bytes, gzipped twice (a few KiB on the wire), built in pieces."""
    inner = zlib.compressobj(9, zlib.DEFLATED, zlib.MAX_WBITS | 16)
    chunk = bytes(2**20)
    parts = [inner.compress(chunk) for _ in range(decoded // len(chunk))]
    parts.append(inner.flush())
    return gzip.compress(b"".join(parts), 9)


def _local(server: RawServer, path: str = "/") -> str:
    return f"http://127.0.0.1:{server.port}{path}"


# -- 1. the decoded size is capped while decoding -----------------------------------------------


async def test_a_gzip_gzip_bomb_is_stopped_at_the_cap_not_after_inflating() -> None:
    bomb = _gzip_gzip_bomb(64 * 2**20)
    assert len(bomb) < 100 * 1024
    answer = http_answer(
        bomb, headers={"Content-Encoding": "gzip, gzip", "Content-Type": "application/xml"}
    )
    async with (
        RawServer(lambda _: answer) as server,
        Session(retry=ONCE, max_body_bytes=2**20, allow_private_network=True) as s,
    ):
        with pytest.raises(UpstreamUnavailable, match="over the cap of 1048576 bytes"):
            await s.get(_local(server))
        assert "BodyTooLarge" in s.failures[0]


async def test_a_streamed_download_of_a_bomb_stops_at_the_cap_and_writes_nothing(
    tmp_path: Path,
) -> None:
    answer = http_answer(_gzip_gzip_bomb(32 * 2**20), headers={"Content-Encoding": "gzip, gzip"})
    target = tmp_path / "data.bin"
    async with (
        RawServer(lambda _: answer) as server,
        Session(retry=ONCE, max_body_bytes=2**20, allow_private_network=True) as s,
    ):
        with pytest.raises(UpstreamUnavailable, match="over the cap"):
            await s.download_to(_local(server), target)
    assert list(tmp_path.iterdir()) == []


async def test_more_than_two_stacked_codings_are_refused_at_once() -> None:
    body = gzip.compress(gzip.compress(gzip.compress(b"<a/>")))
    answer = http_answer(body, headers={"Content-Encoding": "gzip, gzip, gzip"})
    async with (
        RawServer(lambda _: answer) as server,
        Session(retry=FAST_RETRY, allow_private_network=True) as s,
    ):
        with pytest.raises(UpstreamUnavailable, match="3 stacked content codings"):
            await s.get(_local(server))
        assert server.paths == ["/"]  # refused, not retried


@pytest.mark.parametrize(
    ("coding", "encode"),
    [
        ("gzip", gzip.compress),
        ("deflate", zlib.compress),
        ("deflate", lambda b: zlib.compress(b)[2:-4]),  # raw deflate, as some servers send
        ("gzip, deflate", lambda b: zlib.compress(gzip.compress(b))),
        ("gzip", lambda b: gzip.compress(b[:5000]) + gzip.compress(b[5000:])),  # two members
        ("identity", lambda b: b),
    ],
)
async def test_every_decoded_coding_gives_the_body_back_whole(
    coding: str, encode: Callable[[bytes], bytes]
) -> None:
    body = b"<article>" + b"".join(b"<p>%d</p>" % i for i in range(20000)) + b"</article>"
    answer = http_answer(
        encode(body), headers={"Content-Encoding": coding, "Content-Type": "application/xml"}
    )
    async with (
        RawServer(lambda _: answer) as server,
        Session(retry=ONCE, allow_private_network=True) as s,
    ):
        got = await s.get(_local(server))
    assert got.content == body


async def test_a_body_that_is_not_what_its_coding_says_is_a_decoding_failure() -> None:
    answer = http_answer(b"not gzip at all", headers={"Content-Encoding": "gzip"})
    async with (
        RawServer(lambda _: answer) as server,
        Session(retry=ONCE, allow_private_network=True) as s,
    ):
        with pytest.raises(UpstreamUnavailable, match=re.escape("DecodingError from 127.0.0.1")):
            await s.get(_local(server))


# -- 2. private networks stay private -----------------------------------------------------------


@pytest.fixture
def fake_dns(monkeypatch: pytest.MonkeyPatch) -> Iterator[dict[str, list[str]]]:
    """Names under ``.test`` resolve to what the test puts in the returned map, in turn.

    The test suite's network guard (conftest) lets these names through: the
    resolver here is the only one they reach, and it answers without a network.
    """
    answers: dict[str, list[str]] = {}
    real = socket.getaddrinfo

    def getaddrinfo(host: Any, port: Any, *args: Any, **kwargs: Any) -> Any:
        name = host.decode() if isinstance(host, bytes) else str(host)
        if name.endswith(".test"):
            queue = answers[name]
            address = queue.pop(0) if len(queue) > 1 else queue[0]
            return [(socket.AF_INET, socket.SOCK_STREAM, 6, "", (address, int(port or 0)))]
        return real(host, port, *args, **kwargs)

    monkeypatch.setattr(socket, "getaddrinfo", getaddrinfo)
    names = frozenset({"intranet.test", "rebind.test", "sneaky.test", "public.example"})
    monkeypatch.setattr(conftest, "_LOOPBACK", conftest._LOOPBACK | names)
    yield answers


class _PublicEdge(httpx.AsyncBaseTransport):
    """``public.example`` answered in process (a public host's redirect); the rest on sockets."""

    def __init__(self, location: str) -> None:
        self.location = location
        self.real = httpx.AsyncHTTPTransport(retries=0)

    async def handle_async_request(self, request: httpx.Request) -> httpx.Response:
        if request.url.host == "public.example":
            return httpx.Response(302, headers={"Location": self.location})
        return await self.real.handle_async_request(request)

    async def aclose(self) -> None:
        await self.real.aclose()


def _edge_factory(location: str) -> Callable[[], httpx.AsyncClient]:
    return lambda: httpx.AsyncClient(transport=_PublicEdge(location))


@pytest.mark.guarded_network
async def test_a_name_that_resolves_to_loopback_is_refused_before_connecting(
    fake_dns: dict[str, list[str]],
) -> None:
    async with RawServer(lambda _: http_answer(b"internal secret")) as server:
        fake_dns["intranet.test"] = ["127.0.0.1"]
        async with Session(retry=FAST_RETRY) as s:
            with pytest.raises(UpstreamUnavailable, match="PrivateNetworkRefused") as caught:
                await s.get(f"http://intranet.test:{server.port}/admin")
        assert "non-public address 127.0.0.1" in str(caught.value)
        assert server.connections == 0


@pytest.mark.guarded_network
@pytest.mark.parametrize("host", ["127.0.0.1", "localhost"])
async def test_a_first_request_to_this_machine_is_refused_by_default(host: str) -> None:
    async with RawServer(lambda _: http_answer(b"internal")) as server:
        async with Session(retry=FAST_RETRY) as s:
            with pytest.raises(UpstreamUnavailable, match="PrivateNetworkRefused"):
                await s.get(f"http://{host}:{server.port}/")
        assert server.connections == 0


@pytest.mark.guarded_network
async def test_a_redirect_to_a_name_inside_the_network_saves_nothing(
    fake_dns: dict[str, list[str]], tmp_path: Path
) -> None:
    async with RawServer(lambda _: http_answer(b"internal secret")) as server:
        fake_dns["intranet.test"] = ["10.1.2.3", "127.0.0.1"]
        factory = _edge_factory(f"http://intranet.test:{server.port}/secret")
        async with Session(client_factory=factory, retry=FAST_RETRY) as s:
            with pytest.raises(UpstreamUnavailable, match=re.escape("non-public address 10.1.2.3")):
                await s.download_to("http://public.example/paper.pdf", tmp_path / "paper.pdf")
            with pytest.raises(UpstreamUnavailable, match="PrivateNetworkRefused"):
                await s.get("http://public.example/record", follow_redirects=True)
        assert server.connections == 0
    assert list(tmp_path.iterdir()) == []


@pytest.mark.guarded_network
async def test_the_opt_in_lets_an_intranet_mirror_answer(
    fake_dns: dict[str, list[str]], tmp_path: Path
) -> None:
    async with RawServer(lambda _: http_answer(b"%PDF-1.7 mirror copy")) as server:
        fake_dns["intranet.test"] = ["127.0.0.1"]
        factory = _edge_factory(f"http://intranet.test:{server.port}/paper.pdf")
        async with Session(client_factory=factory, allow_private_network=True) as s:
            done = await s.download_to("http://public.example/paper.pdf", tmp_path / "p.pdf")
    assert done.status_code == 200
    assert (tmp_path / "p.pdf").read_bytes() == b"%PDF-1.7 mirror copy"


@pytest.mark.guarded_network
async def test_the_connection_goes_to_the_address_that_was_checked(
    fake_dns: dict[str, list[str]], monkeypatch: pytest.MonkeyPatch
) -> None:
    # DNS rebinding: public when checked, loopback when asked again. The connect is
    # stubbed (nothing is sent anywhere); it must be asked for the checked address.
    fake_dns["rebind.test"] = ["93.184.215.14", "127.0.0.1"]
    asked: list[str] = []

    async def connect_tcp(self: object, host: str, port: int, **kwargs: Any) -> Any:
        asked.append(host)
        raise httpcore.ConnectError("stubbed: no network in tests")

    monkeypatch.setattr(httpcore.AnyIOBackend, "connect_tcp", connect_tcp)
    async with Session(retry=ONCE) as s:
        with pytest.raises(UpstreamUnavailable, match="ConnectError"):
            await s.get("http://rebind.test/")
    assert asked == ["93.184.215.14"]


@pytest.mark.guarded_network
async def test_the_socket_actually_connected_to_is_judged_again(
    fake_dns: dict[str, list[str]], monkeypatch: pytest.MonkeyPatch
) -> None:
    # A transport that resolves on its own (here: connects to loopback whatever it was
    # told) is caught on the socket's peer address, before a byte of the request is sent.
    fake_dns["sneaky.test"] = ["93.184.215.14"]
    async with RawServer(lambda _: http_answer(b"internal")) as server:
        real = httpcore.AnyIOBackend.connect_tcp

        async def connect_tcp(self: Any, host: str, port: int, **kwargs: Any) -> Any:
            return await real(self, "127.0.0.1", server.port, **kwargs)

        monkeypatch.setattr(httpcore.AnyIOBackend, "connect_tcp", connect_tcp)
        async with Session(retry=ONCE) as s:
            with pytest.raises(
                UpstreamUnavailable, match=re.escape("non-public address 127.0.0.1")
            ):
                await s.get("http://sneaky.test/")
        assert server.paths == []


# -- 4. JSON is bounded -------------------------------------------------------------------------


def _json_session(body: bytes, **kwargs: Any) -> Session:
    def handler(request: httpx.Request) -> httpx.Response:
        return httpx.Response(200, content=body, headers={"Content-Type": "application/json"})

    return mock_session(handler, retry=ONCE, **kwargs)


async def test_deeply_nested_json_is_an_unexpected_payload_with_its_reason() -> None:
    deep = b"[" * 100_000 + b"]" * 100_000
    async with _json_session(deep) as s:
        with pytest.raises(UpstreamUnavailable, match="JSON nested deeper than 256 levels"):
            await s.get("https://api.example.org/works")
        assert "UnexpectedPayload" in s.failures[0]


async def test_json_nested_within_the_limit_still_parses() -> None:
    fine = b'{"a": ' * 200 + b'"[[[[not brackets"' + b"}" * 200
    async with _json_session(fine) as s:
        got = await s.get("https://api.example.org/works")
    assert got.json()["a"]["a"]


async def test_wide_json_over_the_json_limit_is_refused_below_the_byte_cap() -> None:
    assert DEFAULT_MAX_JSON_BYTES < DEFAULT_MAX_BODY_BYTES
    wide = b"[" + b",".join([b"1"] * 600_000) + b"]"
    async with _json_session(wide, max_json_bytes=2**20) as s:
        with pytest.raises(UpstreamUnavailable, match="over the JSON limit of 1048576 bytes"):
            await s.get("https://api.example.org/works")


async def test_an_error_answer_with_deep_json_is_refused_too() -> None:
    deep = b"{" + b'"a":{' * 50_000 + b"}" * 50_001

    def handler(request: httpx.Request) -> httpx.Response:
        return httpx.Response(404, content=deep, headers={"Content-Type": "application/json"})

    async with mock_session(handler, retry=ONCE) as s:
        with pytest.raises(UpstreamUnavailable, match="nested deeper"):
            await s.get("https://api.example.org/works/x")


# -- 5. an empty XML 200 is an error, retried, never cached -------------------------------------


async def test_an_empty_xml_200_is_retried_and_never_cached(tmp_path: Path) -> None:
    calls = 0

    def handler(request: httpx.Request) -> httpx.Response:
        nonlocal calls
        calls += 1
        return httpx.Response(200, content=b"", headers={"Content-Type": "application/xml"})

    url = "https://www.ebi.ac.uk/europepmc/webservices/rest/PMC1/fullTextXML"
    async with mock_session(handler, cache=tmp_path / "cache") as s:
        with pytest.raises(
            UpstreamUnavailable, match=re.escape("an empty XML body from www.ebi.ac.uk")
        ):
            await s.get(url)
    assert calls == FAST_RETRY.max_attempts
    async with Session(cache=tmp_path / "cache", offline=True) as offline:
        with pytest.raises(NotInCache):
            await offline.get(url)


# -- 7. framing, credentials across hosts, a foreign cache file ----------------------------------


async def test_a_response_planted_past_the_framing_is_never_served_nor_cached(
    tmp_path: Path,
) -> None:
    planted = http_answer(b"PLANTED")

    def answer(path: str) -> bytes:
        if path == "/a":
            # Content-Length says 5; the server goes on with an answer nobody asked for yet.
            return http_answer(b"first") + planted
        return http_answer(b"second")

    cache = tmp_path / "cache"
    async with RawServer(answer) as server:
        async with Session(cache=cache, allow_private_network=True, retry=ONCE) as s:
            first = await s.get(_local(server, "/a"))
            second = await s.get(_local(server, "/b"))
        assert server.paths == ["/a", "/b"]
        assert server.connections == 2  # the overrun connection was not used again
    assert (first.content, second.content) == (b"first", b"second")
    async with Session(cache=cache, offline=True) as offline:
        assert (await offline.get(_local(server, "/b"))).content == b"second"
    raw = b"".join(p.read_bytes() for p in tmp_path.rglob("*") if p.is_file())
    assert b"PLANTED" not in raw


SECRETS = {
    "X-ELS-APIKey": "els-key-123456",
    "x-api-key": "s2-key-123456",
    "Authorization": "Bearer tok-123456",
    "Crossref-Plus-API-Token": "Bearer plus-123456",
}


@pytest.mark.parametrize(
    ("target", "kept"),
    [("https://evil.example/x", False), ("https://api.elsevier.com/other", True)],
)
async def test_credential_headers_do_not_follow_a_redirect_to_another_host(
    target: str, kept: bool
) -> None:
    seen: list[httpx.Headers] = []

    def handler(request: httpx.Request) -> httpx.Response:
        if request.url.path == "/start":
            return httpx.Response(302, headers={"Location": target})
        seen.append(request.headers)
        return httpx.Response(200, json={"ok": True})

    async with mock_session(handler) as s:
        got = await s.get("https://api.elsevier.com/start", headers=SECRETS, follow_redirects=True)
    assert got.status_code == 200
    carried = {k: v for k, v in seen[0].items() if k.lower() in {h.lower() for h in SECRETS}}
    assert bool(carried) is kept
    if kept:
        assert carried["x-els-apikey"] == "els-key-123456"


def _foreign_db(path: Path) -> None:
    conn = sqlite3.connect(path)
    conn.execute("PRAGMA journal_mode = DELETE")
    conn.execute("CREATE TABLE people (name TEXT)")
    conn.execute("INSERT INTO people VALUES ('ada')")
    conn.commit()
    conn.close()


def test_an_unrelated_sqlite_file_is_refused_as_cache_and_left_untouched(tmp_path: Path) -> None:
    path = tmp_path / "lab.sqlite"
    _foreign_db(path)
    before = hashlib.sha256(path.read_bytes()).hexdigest()
    with pytest.raises(ValueError, match="another program's SQLite database"):
        Session(cache=path)
    assert hashlib.sha256(path.read_bytes()).hexdigest() == before
    conn = sqlite3.connect(path)
    try:
        tables = [r[0] for r in conn.execute("SELECT name FROM sqlite_master")]
        (mode,) = conn.execute("PRAGMA journal_mode").fetchone()
    finally:
        conn.close()
    assert tables == ["people"]
    assert mode == "delete"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["lab.sqlite"]


def test_an_empty_file_and_the_librarys_own_cache_are_still_accepted(tmp_path: Path) -> None:
    empty = tmp_path / "new.sqlite"
    empty.touch()
    Session(cache=empty)
    Session(cache=empty)  # now the library's own: opened again
