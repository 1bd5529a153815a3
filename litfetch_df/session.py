"""The :class:`Session`: one HTTP client, per-host pacing, retries, scope caches.

A session is the object callers hold. Its scopes (children made with
:meth:`Session.scope`) share the client and the per-host pacing state but each
owns a short-lived response cache, so two sources that read the same upstream
record inside one unit of work cost one request.

The send-and-retry loop is the wire layer's (:class:`~litfetch_df.wire.sender.Sender`);
primed answers and per-id records are the store's (:mod:`litfetch_df.store.primed`,
:mod:`litfetch_df.store.records`). What stays here is the contract's methods and the
request path that decides, per request, between a scope's shared future, a primed
answer, the memo, the persistent cache and the network.

(About 900 lines, over the project's 550: that request path, the client's lifetime and
the streamed download are one class's state; splitting them would pass the same dozen
fields between modules.)
"""

from __future__ import annotations

import asyncio
import hashlib
import json as jsonlib
from collections.abc import Awaitable, Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from types import TracebackType
from typing import TYPE_CHECKING, Any

import httpx

from . import _version
from .files import Blob, File, FileKind, Saved
from .ids import ArticleIds
from .metadata import Related, SourceMetadata
from .store.answers import CachedResponse, NotInCache, Recalled, ResponseStore
from .store.atomic import DigestSink, PartFile, write_atomic
from .store.memo import AnswerMemo
from .store.primed import PrimedAnswers, is_deterministic, request_key
from .store.quota import QuotaLedger
from .store.records import keep_record, recall_record
from .store.replay import Replayed, entry_of
from .wire.clock import Clock, SystemClock
from .wire.http import (
    Rate,
    RetryPolicy,
    UpstreamUnavailable,
    get_logger,
    install_log_redaction,
    is_secret_header,
    is_secret_param,
    redact_url,
)
from .wire.limiter import HostLimit, HostLimiter, Lessons, LimiterFactory, LimiterState
from .wire.netguard import allow_private_network_default
from .wire.sender import Sender
from .wire.transfer import (
    DEADLINE_PER_TIMEOUT,
    DEFAULT_MAX_BODY_BYTES,
    DEFAULT_MAX_JSON_BYTES,
    DEFAULT_MAX_JSON_DEPTH,
    Bounds,
    Downloaded,
    HeadCheck,
    UnexpectedPayload,
    check_payload,
    stream_bounded,
)

if TYPE_CHECKING:
    from .operations.types import Fetcher, FileSource, Resolver

__all__ = ["CachedResponse", "NotInCache", "ResponseStore", "Session", "request_key"]

log = get_logger("litfetch_df.session")


def default_user_agent(contact: str | None) -> str:
    """Return ``litfetch_df/<version>``, plus `` (mailto:<contact>)`` when a contact is set."""
    base = f"litfetch_df/{_version.__version__}"
    return f"{base} (mailto:{contact})" if contact else base


@dataclass
class _Shared:
    """State common to a session and all its scopes."""

    client_factory: Callable[[], httpx.AsyncClient] | None
    retry: RetryPolicy
    timeout: float
    contact: str | None
    store: ResponseStore | None
    offline: bool
    refresh: bool
    # Open between __aenter__ and __aexit__; the client itself is built on first use, so a
    # run answered wholly from the cache never pays for one (TLS set-up, transport imports).
    is_open: bool = False
    client: httpx.AsyncClient | None = None
    owns_client: bool = False
    owns_store: bool = False
    clock: Clock = field(default_factory=SystemClock)
    # Answers a table-level caller derived from bulk lookups, by request key (see prime()).
    primed: PrimedAnswers = field(default_factory=PrimedAnswers)
    # What one attempt may cost and where its redirects may go (see litfetch_df.wire.transfer).
    bounds: Bounds = field(default_factory=Bounds)
    # Small JSON answers the scopes got, shared by later scopes (store/memo.py); None: off.
    memo: AnswerMemo | None = None
    # What each metered host has left today (or this week), kept beside the cache.
    quota: QuotaLedger | None = None
    # The network: host limiters, retries, request counts (set by Session.__init__).
    sender: Sender | None = None


class _Default:
    """The type of a "not given" marker, where ``None`` is a meaningful value."""


_DEFAULT = _Default()


def _secrets_of(
    params: Mapping[str, str | int] | None, headers: Mapping[str, str] | None
) -> list[str]:
    found = [str(v) for k, v in (params or {}).items() if is_secret_param(k) and str(v)]
    found += [v for k, v in (headers or {}).items() if is_secret_header(k) and v]
    return found


class Session:
    """An async context manager owning the HTTP client and per-host pacing.

    ``client_factory`` builds the :class:`httpx.AsyncClient` (proxy, EZproxy,
    CA certificates); the default one sends a ``litfetch_df`` User-Agent with
    the ``contact`` mailto. ``retry`` governs :meth:`get`. ``cache`` is an
    optional persistent response store (a path or a
    :class:`~litfetch_df.store.cache.ResponseCache`); ``offline=True`` answers only
    from it; ``refresh=True`` ignores stored entries but still records new ones.

    Every host is paced by a limiter that learns its limit (ADR 0007), within
    the published ceilings of :mod:`litfetch_df.limits` for each kind of request
    (Springer Nature Basic's 100 a minute, Crossref's lists at 3/s);
    ``host_limits`` states what you know of a host's limit
    (``{"api.springernature.com": HostLimit(rate=5)}``), a ceiling it will
    never pass, and a rate given there replaces the table's (another plan).
    ``clock`` replaces the real clock (tests pass a virtual one).
    ``limiter_factory`` builds each host's limiter (default
    :class:`~litfetch_df.wire.limiter.HostLimiter`); ``litfetch_df.dask`` passes
    one whose hosts share a politeness budget across a cluster (ADR 0013).

    Every attempt is bounded: ``deadline`` seconds for the whole of it, body
    included (default ``4 * timeout``; ``None`` for none), and ``max_body_bytes``
    of body (default 128 MiB; ``None`` for no cap). Followed redirects never go
    from ``https`` to ``http`` nor from a public address to a non-public one,
    unless ``allow_insecure_redirects`` / ``allow_private_redirects``. See
    docs/adr/0010-request-bounds-and-redirects.md. The body is counted while
    it is decoded (at most two stacked content codings), and a JSON answer
    must stay within ``max_json_bytes`` (default 32 MiB) and
    ``max_json_depth`` levels (default 256).

    No connection goes to a loopback, private, link-local or otherwise
    non-public address (judged on the address resolved and connected to, for
    every request and redirect hop) unless ``allow_private_network=True``
    (an intranet mirror, a local test server); ``None`` reads the
    ``LITFETCH_DF_ALLOW_PRIVATE_NETWORK`` environment variable (off when
    unset). See docs/adr/0019-private-networks.md.

    With a ``memo`` (an :class:`~litfetch_df.store.memo.AnswerMemo`; see
    :meth:`keep_answers`), a scope keeps the small JSON answers (200 or 404)
    it gets to a GET there, and later scopes are served from it, so a record
    several steps read is asked for once in the session's life; sessions given
    one memo share their answers. The ``.lit`` calls turn it on for the
    sessions they use; without it each scope's cache is its own. ``lessons``
    (from an earlier session's :meth:`lessons`) start each host's limiter where
    that session's left off.
    """

    def __init__(
        self,
        *,
        client_factory: Callable[[], httpx.AsyncClient] | None = None,
        retry: RetryPolicy | None = None,
        timeout: float = 30.0,
        contact: str | None = None,
        cache: Any = None,
        cache_ttl: float | None = None,
        offline: bool = False,
        refresh: bool = False,
        host_limits: Mapping[str, HostLimit] | None = None,
        clock: Clock | None = None,
        limiter_factory: LimiterFactory | None = None,
        deadline: float | _Default | None = _DEFAULT,
        max_body_bytes: int | None = DEFAULT_MAX_BODY_BYTES,
        allow_private_redirects: bool = False,
        allow_insecure_redirects: bool = False,
        memo: AnswerMemo | None = None,
        lessons: Mapping[str, Lessons] | None = None,
        quotas: Mapping[tuple[str, str], int] | None = None,
        allow_private_network: bool | None = None,
        max_json_bytes: int = DEFAULT_MAX_JSON_BYTES,
        max_json_depth: int = DEFAULT_MAX_JSON_DEPTH,
    ) -> None:
        install_log_redaction()
        if allow_private_network is None:
            allow_private_network = allow_private_network_default()
        bounds = Bounds(
            deadline=timeout * DEADLINE_PER_TIMEOUT if isinstance(deadline, _Default) else deadline,
            max_body_bytes=max_body_bytes,
            allow_private_redirects=allow_private_redirects,
            allow_insecure_redirects=allow_insecure_redirects,
            allow_private_network=bool(allow_private_network),
            max_json_bytes=max_json_bytes,
            max_json_depth=max_json_depth,
        )
        store = _open_store(cache, cache_ttl)
        if offline and store is None:
            raise ValueError("offline=True needs a persistent cache (cache=<path>)")
        self._shared = _Shared(
            client_factory=client_factory,
            retry=retry if retry is not None else RetryPolicy(),
            timeout=timeout,
            contact=contact.strip() if contact and contact.strip() else None,
            store=store,
            offline=offline,
            refresh=refresh,
            owns_store=store is not None and store is not cache,
            clock=clock if clock is not None else SystemClock(),
            bounds=bounds,
            memo=memo,
        )
        shared = self._shared
        shared.quota = QuotaLedger(_ledger_directory(store), now=shared.clock.wall, quotas=quotas)
        shared.sender = Sender(
            client=lambda: self.client,
            retry=shared.retry,
            clock=shared.clock,
            bounds=bounds,
            host_limits={h.lower(): v for h, v in (host_limits or {}).items()},
            limiter_factory=limiter_factory if limiter_factory is not None else HostLimiter,
            lessons=dict(lessons or {}),
            budget=shared.quota,
        )
        self._parent: Session | None = None
        self._cache: dict[str, asyncio.Future[httpx.Response]] | None = None
        self._failures: list[str] = []

    # -- lifecycle ---------------------------------------------------------------------------

    async def __aenter__(self) -> Session:
        shared = self._shared
        if self._parent is not None:
            if not shared.is_open:
                raise RuntimeError("enter the parent Session (async with) before one of its scopes")
            self._cache = {}
            self._failures = []
            return self
        if shared.is_open:
            raise RuntimeError("this Session is already open")
        shared.is_open = True
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        if self._parent is not None:
            self._cache = {}
            return
        shared = self._shared
        if shared.quota is not None:
            shared.quota.save()
        client, shared.client = shared.client, None
        shared.is_open = False
        if client is not None and shared.owns_client:
            await client.aclose()
        if shared.owns_store and shared.store is not None:
            close = getattr(shared.store, "close", None)
            if callable(close):
                close()

    def scope(self) -> Session:
        """Return a child session sharing this one's client, pacing and contact.

        The child owns a response cache that lives while it is entered (``async
        with``), so a second ask of one request inside it costs nothing.
        """
        child = Session.__new__(Session)
        child._shared = self._shared
        child._parent = self
        child._cache = {}
        child._failures = []
        return child

    def __repr__(self) -> str:
        kind = "scope" if self._parent is not None else "session"
        state = "open" if self._shared.is_open else "closed"
        contact = f" contact={self._shared.contact!r}" if self._shared.contact else ""
        return f"<litfetch_df.Session {kind} {state}{contact}>"

    # -- properties --------------------------------------------------------------------------

    @property
    def client(self) -> httpx.AsyncClient:
        """The raw :class:`httpx.AsyncClient`; valid only inside ``async with``.

        Built on first use (by ``client_factory`` when given), and closed when
        the session exits.
        """
        shared = self._shared
        if not shared.is_open:
            raise RuntimeError("Session.client is only available inside 'async with Session()'")
        if shared.client is None:
            if shared.client_factory is not None:
                shared.client = shared.client_factory()
            else:
                shared.client = httpx.AsyncClient(
                    headers={"User-Agent": default_user_agent(shared.contact)},
                    timeout=httpx.Timeout(shared.timeout),
                    limits=httpx.Limits(max_connections=200, max_keepalive_connections=50),
                    follow_redirects=False,
                )
            shared.owns_client = True
        return shared.client

    @property
    def is_open(self) -> bool:
        """Whether the session (or the session this scope belongs to) is entered."""
        return self._shared.is_open

    @property
    def contact(self) -> str | None:
        """The caller's contact email, sent where upstream etiquette asks for one."""
        return self._shared.contact

    @property
    def retry(self) -> RetryPolicy:
        """The retry policy of :meth:`get`."""
        return self._shared.retry

    @property
    def bounds(self) -> Bounds:
        """What one attempt may cost (deadline, body size) and where its redirects may go."""
        return self._shared.bounds

    @property
    def offline(self) -> bool:
        """Whether requests are answered only from the persistent cache."""
        return self._shared.offline

    @property
    def failures(self) -> tuple[str, ...]:
        """Short reasons for requests of this scope that were given up after every retry.

        A scope keeps every reason; a session used directly keeps its first 50.
        """
        return tuple(self._failures)

    @property
    def requests_sent(self) -> int:
        """How many requests (attempts included) went to the network through this session."""
        return self._sender.requests_sent

    @property
    def requests_by_host(self) -> dict[str, int]:
        """Network requests per host so far (a copy)."""
        return dict(self._sender.requests_by_host)

    @property
    def quota(self) -> QuotaLedger | None:
        """The ledger of published quotas this session spends (kept beside its cache)."""
        return self._shared.quota

    @property
    def limits(self) -> dict[str, LimiterState]:
        """How each host asked so far is paced right now: rate, ceiling, in-flight cap,
        requests, throttled answers, and whether it is paused or parked (snapshots)."""
        return {host: limiter.state() for host, limiter in self._sender.limiters.items()}

    def lessons(self) -> dict[str, Lessons]:
        """What each host's limiter has learned so far, for a later session to start from.

        Give it to that session as ``Session(lessons=...)``: its limiters then
        start at the pace, in-flight cap and ceilings these reached, instead of
        learning the hosts' limits again. The ``.lit`` calls on one table do this.
        """
        return {host: limiter.lessons() for host, limiter in self._sender.limiters.items()}

    @property
    def _sender(self) -> Sender:
        sender = self._shared.sender
        assert sender is not None  # set by __init__
        return sender

    @property
    def store(self) -> ResponseStore | None:
        """The persistent response cache, if one was configured."""
        return self._shared.store

    # -- priming -----------------------------------------------------------------------------

    def prime(
        self,
        method: str,
        url: str,
        *,
        params: Mapping[str, str | int] | None = None,
        headers: Mapping[str, str] | None = None,
        follow_redirects: bool = False,
        body: bytes | None = None,
        response: CachedResponse | None = None,
        failure: str | None = None,
    ) -> str:
        """Answer one exact request from memory, in this session and all its scopes.

        The request is named by every part :func:`request_key` hashes (a POST
        made with :meth:`post` carries ``Content-Type: application/json`` and
        the compact, key-sorted JSON bytes as ``body``). Give exactly one of
        ``response`` (served instead of the persistent cache and the network;
        its status must be deterministic, and its ``url`` is replaced by the
        redacted request URL) or ``failure`` (a short reason: the request is
        then given up as if every retry had failed, recorded in the asking
        scope's :attr:`failures` and raised as :class:`UpstreamUnavailable`
        (:class:`NotInCache` in an offline session), unless the persistent
        cache holds an answer). Primed answers never reach the persistent cache
        and cost no pacing. Returns the request key, for :meth:`unprime`.
        """
        return self._shared.primed.prime(
            method,
            url,
            params=params,
            headers=headers,
            follow_redirects=follow_redirects,
            body=body,
            response=response,
            failure=failure,
        )

    def is_primed(self, key: str) -> bool:
        """Whether a request keyed ``key`` (:meth:`prime`'s return) is primed, answer or failure."""
        return key in self._shared.primed

    def unprime(self, keys: Iterable[str]) -> None:
        """Forget the primed answers under ``keys`` (as returned by :meth:`prime`)."""
        self._shared.primed.forget(keys)

    async def held(
        self,
        url: str,
        *,
        params: Mapping[str, str | int] | None = None,
        headers: Mapping[str, str] | None = None,
    ) -> CachedResponse | None:
        """Return the answer this session holds for a GET without asking anyone, or ``None``.

        Held: a primed response (see :meth:`prime`; a primed *failure* is not an
        answer), else an answer kept in the :attr:`memo`, else the persistent
        cache's entry (unless the session refreshes). Nothing is sent or
        paced, so a caller that must cost no request can read what a bulk
        lookup or an earlier run already fetched
        (:class:`~litfetch_df.store.answers.HeldAnswers`). Only a request primed as
        a failure, with nothing else holding its answer, is recorded in
        :attr:`failures`: the lookup that would have answered it was given up,
        so what the caller reads is incomplete, not "nothing known".
        """
        key = request_key("GET", url, params, headers, False, None)
        shared = self._shared
        primed = shared.primed.get(key)
        if primed is not None and primed.response is not None:
            memo = shared.memo if self._parent is not None else None
            if memo is not None and memo.load(key) is None:
                # Read by a unit as a get() would: a later call (a re-run) holds it too.
                memo.offer(key, replace(primed.response, url=primed.shown_url()))
            return primed.response
        kept = shared.memo.load(key) if shared.memo is not None else None
        if kept is not None:
            return kept
        stored = shared.store.load(key) if shared.store is not None and not shared.refresh else None
        if stored is None and primed is not None and primed.failure is not None:
            self._note_failure(primed.failure)
        return stored

    @property
    def memo(self) -> AnswerMemo | None:
        """The small answers this session's scopes share (see :meth:`keep_answers`), if on."""
        return self._shared.memo

    def keep_answers(self, memo: AnswerMemo | None = None) -> AnswerMemo:
        """Turn the answer memo on for this session and its scopes; return the memo in use.

        ``memo`` shares another session's answers; without it a session that
        has no memo gets a new one, and one that has keeps it.
        """
        shared = self._shared
        if memo is not None:
            shared.memo = memo
        elif shared.memo is None:
            shared.memo = AnswerMemo()
        return shared.memo

    @property
    def primed_count(self) -> int:
        """How many requests are currently answered from memory (see :meth:`prime`)."""
        return len(self._shared.primed)

    # -- per-id records of bulk lookups ------------------------------------------------------

    def recall_record(self, kind: str, key: str) -> Recalled | None:
        """Return a bulk lookup's stored answer about one id, or ``None`` to ask it.

        ``None`` without a persistent cache, with ``refresh=True``, or when no
        live entry is stored (expired ones included). Offline, stored records
        are served like stored responses. See :meth:`keep_record`.
        """
        shared = self._shared
        if shared.store is None or shared.refresh:
            return None
        return recall_record(shared.store, kind, key)

    def keep_record(self, kind: str, key: str, value: Any, *, secrets: Sequence[str] = ()) -> None:
        """Store what a bulk lookup's service said about one id (``None``: no such id).

        ``value`` must be JSON-able. Kept only with a persistent cache, and never
        when it holds one of ``secrets`` (the credentials the batch request
        carried): a scrubbed record would answer differently from the real one.
        A failure to store is logged, never raised.
        """
        store = self._shared.store
        if store is not None:
            keep_record(store, kind, key, value, secrets=secrets)

    # -- requests ----------------------------------------------------------------------------

    async def get(
        self,
        url: str,
        *,
        params: Mapping[str, str | int] | None = None,
        headers: Mapping[str, str] | None = None,
        rate: Rate = Rate.DEFAULT,
        follow_redirects: bool = False,
    ) -> httpx.Response:
        """Pace per ``rate``, then issue a retrying GET; inside a scope, serve repeats from cache.

        Returns the final response (a retryable status that outlived every retry
        is returned as is). Raises :class:`UpstreamUnavailable` when the
        transport failed on every attempt, and :class:`NotInCache` offline.
        """
        return await self._request(
            "GET", url, params=params, headers=headers, rate=rate, follow=follow_redirects
        )

    async def post(
        self,
        url: str,
        *,
        json: Any = None,
        params: Mapping[str, str | int] | None = None,
        headers: Mapping[str, str] | None = None,
        rate: Rate = Rate.DEFAULT,
    ) -> httpx.Response:
        """Like :meth:`get` for a read-only POST of a JSON body (bulk lookups).

        Paced, retried, and cached on the URL plus the body.
        """
        body = jsonlib.dumps(json, separators=(",", ":"), sort_keys=True).encode()
        merged = {"Content-Type": "application/json", **(headers or {})}
        return await self._request(
            "POST", url, params=params, headers=merged, rate=rate, follow=False, body=body
        )

    async def _request(
        self,
        method: str,
        url: str,
        *,
        params: Mapping[str, str | int] | None,
        headers: Mapping[str, str] | None,
        rate: Rate,
        follow: bool,
        body: bytes | None = None,
    ) -> httpx.Response:
        key = request_key(method, url, params, headers, follow, body)
        cache = self._cache if self._parent is not None else None
        if cache is not None:
            while (pending := cache.get(key)) is not None:
                try:
                    return await asyncio.shield(pending)
                except asyncio.CancelledError:
                    task = asyncio.current_task()
                    if pending.cancelled() and task is not None and not task.cancelling():
                        # The task that owned the request was cancelled, not this one:
                        # take the request over instead of failing with its cancellation.
                        continue
                    raise
            future: asyncio.Future[httpx.Response] = asyncio.get_running_loop().create_future()
            cache[key] = future
            try:
                response = await self._fetch(method, url, key, params, headers, rate, follow, body)
            except BaseException as exc:
                cache.pop(key, None)
                if not future.done():
                    if isinstance(exc, Exception):
                        future.set_exception(exc)
                        future.exception()  # mark retrieved: waiters may not exist
                    else:
                        future.cancel()
                raise
            if not _cacheable(response.status_code, rate):
                cache.pop(key, None)
            future.set_result(response)
            return response
        return await self._fetch(method, url, key, params, headers, rate, follow, body)

    async def _fetch(
        self,
        method: str,
        url: str,
        key: str,
        params: Mapping[str, str | int] | None,
        headers: Mapping[str, str] | None,
        rate: Rate,
        follow: bool,
        body: bytes | None,
    ) -> httpx.Response:
        shared = self._shared
        primed = shared.primed.get(key)
        # Only a unit's scope shares its answers: a caller of the session itself (or a
        # test of pacing) asking the same thing twice means it.
        memo = shared.memo if self._parent is not None and method == "GET" else None
        if primed is not None and primed.response is not None:
            if memo is not None and memo.load(key) is None:
                memo.offer(key, replace(primed.response, url=primed.shown_url()))
            return Replayed(primed.response, method, primed.shown_url)
        if memo is not None:
            kept = memo.load(key)
            if kept is not None:
                return Replayed(kept, method)
        entry = self._stored(key, method, url, params)
        if entry is not None:
            return Replayed(entry, method)
        store = shared.store
        response = await self._sender.send(
            method, url, params, headers, rate, follow, body, note=self._note_failure
        )
        if _cacheable(response.status_code, rate) and (store is not None or memo is not None):
            entry = entry_of(response)
            if memo is not None:
                memo.offer(key, entry)
            if store is not None:
                try:
                    store.save(key, entry, secrets=_secrets_of(params, headers))
                except Exception as exc:  # a cache must never fail the request it serves
                    log.warning("could not store a response in the cache: %s", type(exc).__name__)
        return response

    async def download_to(
        self,
        url: str,
        path: str | Path,
        *,
        head_check: HeadCheck | None = None,
        rate: Rate = Rate.DEFAULT,
        follow_redirects: bool = True,
    ) -> Downloaded:
        """Stream a paced, retried GET of ``url`` into the file ``path``; never hold it whole.

        The body goes to a hidden ``.part`` file beside ``path`` under every
        bound of an attempt (deadline, size cap, redirect policy; see
        :attr:`bounds`), with its first KiB judged before the rest is taken
        (``head_check`` raises to refuse it, e.g. an HTML page for a PDF). Only
        a whole 200 is moved to ``path``, atomically; a transient failure
        starts the file again on the next attempt, and anything else (a
        refusal, a cap passed, every retry spent, a non-200) leaves neither
        ``path`` changed nor a ``.part`` file behind.

        Returns :class:`~litfetch_df.wire.transfer.Downloaded`: the final status
        and, after a 200, the path, size and SHA-256 of what was written.
        Raises like :meth:`get` (:class:`UpstreamUnavailable` after every
        retry, :class:`NotInCache` offline), and whatever ``head_check`` raises.

        The persistent cache is read (an answer an earlier in-memory fetch
        stored is written out from it, and an offline session answers only from
        it) but a streamed body is never stored in it: storing would mean
        holding it whole. See docs/adr/0015-streamed-downloads.md.
        """
        target = Path(path)
        key = request_key("GET", url, None, None, follow_redirects, None)
        stored = self._stored(key, "GET", url, None)
        if stored is not None:
            return await self._write_stored(stored, target, head_check)
        sink: DigestSink | None = None

        def attempt(client: httpx.AsyncClient) -> Awaitable[httpx.Response]:
            assert sink is not None
            sink.rewind()  # a retry starts the file again
            return stream_bounded(
                client,
                url,
                headers=None,
                follow_redirects=follow_redirects,
                bounds=self._shared.bounds,
                sink=sink,
                head_check=head_check,
                clock=self._shared.clock,
            )

        with PartFile(target) as part:
            sink = DigestSink(part)
            response = await self._sender.send(
                "GET",
                url,
                None,
                None,
                rate,
                follow_redirects,
                None,
                note=self._note_failure,
                send=attempt,
            )
            status = response.status_code
            if status != 200:
                await response.aclose()
                return Downloaded(status, host=response.url.host)
            part.commit()
            return Downloaded(status, target, sink.size, sink.digest.hexdigest())

    def _stored(
        self, key: str, method: str, url: str, params: Mapping[str, str | int] | None
    ) -> CachedResponse | None:
        """The primed or persistent answer to a request, or ``None`` to ask the network.

        Raises, as :meth:`_fetch` does, for a primed failure and for an offline miss.
        """
        shared = self._shared
        primed = shared.primed.get(key)
        if primed is not None and primed.response is not None:
            return primed.response
        store = shared.store
        if store is not None and not shared.refresh:
            entry = store.load(key)
            if entry is not None:
                return entry
        if primed is None and not shared.offline:
            return None
        shown = redact_url(httpx.URL(url, params=params or {}))
        if primed is not None:
            # A stored answer (above) is a real one and beats a primed failure.
            reason = primed.failure or "no answer"
            self._note_failure(reason)
            # Offline, the cache lacks this request's answer too: say so by the class.
            unavailable = NotInCache if shared.offline else UpstreamUnavailable
            raise unavailable(f"{reason}: {method} {shown}")
        if shared.offline:
            reason = f"not in cache: {method} {shown}"
            self._note_failure(reason)
            raise NotInCache(reason)
        return None

    async def _write_stored(
        self, entry: CachedResponse, target: Path, head_check: HeadCheck | None
    ) -> Downloaded:
        """Write a stored answer out as :meth:`download_to` would have (it is in memory already)."""
        if entry.status_code != 200:
            return Downloaded(entry.status_code)
        replayed = Replayed(entry, "GET")
        try:
            check_payload(replayed, download=True)
        except UnexpectedPayload:
            # Stored before payloads were checked; a fresh session would fetch it again.
            self._note_failure("a stored answer is not what it claims to be")
            raise
        if head_check is not None:
            head_check(entry.content[:65536])
        await asyncio.to_thread(write_atomic, target, entry.content)
        digest = hashlib.sha256(entry.content).hexdigest()
        return Downloaded(200, target, len(entry.content), digest)

    def _note_failure(self, reason: str) -> None:
        # A row's error cell shows this text: never let it be blank.
        reason = reason.strip() or "a request was given up (no reason given)"
        # A scope lives for one unit of work, whose steps read its reasons by position, so
        # it keeps every one; a long-lived session keeps only the first few, to stay bounded.
        if self._parent is not None or len(self._failures) < _SESSION_FAILURES_KEPT:
            self._failures.append(reason)

    # -- operations (the litfetch surface) ---------------------------------------------------

    async def fetch_body(
        self,
        article_ids: ArticleIds,
        *,
        resolver: Resolver | None = None,
        fetchers: Sequence[Fetcher] | None = None,
        credentials: Mapping[str, object] | None = None,
    ) -> Blob | None:
        """Walk the fetcher ladder and return the first body :class:`Blob`, or ``None``."""
        from .operations import ladder

        return await ladder.fetch_body(
            self, article_ids, resolver=resolver, fetchers=fetchers, credentials=credentials
        )

    async def list_files(
        self,
        article_ids: ArticleIds,
        *,
        sources: Sequence[FileSource] | None = None,
        kind: FileKind | None = None,
        credentials: Mapping[str, object] | None = None,
    ) -> tuple[File, ...]:
        """Enumerate the file-set across all sources (a union), optionally filtered by ``kind``."""
        from .operations import fileset

        return await fileset.list_files(
            self, article_ids, sources=sources, kind=kind, credentials=credentials
        )

    async def fetch_file(
        self,
        file: File,
        *,
        sources: Sequence[FileSource] | None = None,
        credentials: Mapping[str, object] | None = None,
    ) -> Blob | None:
        """Download one :class:`File` through the source named by ``file.source``."""
        from .operations import fileset

        return await fileset.fetch_file(self, file, sources=sources, credentials=credentials)

    async def fetch_file_to(
        self,
        file: File,
        path: str | Path,
        *,
        sources: Sequence[FileSource] | None = None,
        credentials: Mapping[str, object] | None = None,
    ) -> Saved | None:
        """Download one :class:`File` straight into ``path``; never hold it whole in memory.

        Streamed through the source named by ``file.source`` under every bound
        of an attempt, checked against the type it was listed as, written to a
        ``.part`` file and moved to ``path`` only when whole. Returns
        :class:`~litfetch_df.Saved` (path, size, SHA-256), or ``None`` when no
        source claims the file, the source declines or the download fails
        (nothing is written then). See
        :func:`litfetch_df.operations.fileset.fetch_file_to`.
        """
        from .operations import fileset

        return await fileset.fetch_file_to(
            self, file, path, sources=sources, credentials=credentials
        )

    async def resolve_access(
        self, article_ids: ArticleIds, *, email: str | None = None
    ) -> SourceMetadata:
        """Return Unpaywall's licence / OA status for the DOI (``basis='unpaywall'``)."""
        from .operations import access

        return await access.resolve_access(self, article_ids, email=email)

    async def related_ids(self, article_ids: ArticleIds) -> tuple[Related, ...]:
        """Return preprint / published counterparts of the article, keyed on its DOI."""
        from .operations import relations

        return await relations.related_ids(self, article_ids)


# How many failure reasons a session (not a scope) keeps; see Session.failures.
_SESSION_FAILURES_KEPT = 50


def _cacheable(status_code: int, rate: Rate) -> bool:
    return is_deterministic(status_code) and status_code not in rate.transient_statuses


def _ledger_directory(store: ResponseStore | None) -> Path | None:
    """The directory the quota ledger is kept in: the persistent cache's, if any."""
    path = getattr(store, "path", None)
    return Path(path).parent if isinstance(path, str | Path) else None


def _open_store(cache: Any, ttl: float | None) -> ResponseStore | None:
    if cache is None or cache is False:
        return None
    if hasattr(cache, "load") and hasattr(cache, "save"):
        return cache  # type: ignore[no-any-return]
    from .store.cache import open_cache

    return open_cache(cache, ttl=ttl)
