"""The :class:`Session`: one HTTP client, per-host pacing, retries, scope caches.

A session is the object callers hold. Its scopes (children made with
:meth:`Session.scope`) share the client and the per-host pacing state but each
owns a short-lived response cache, so two sources that read the same upstream
record inside one unit of work cost one request.

(About 1,200 lines, over the project's 650: the contract's methods, the client's
lifetime, the send-and-retry loop, priming and records are still one class; the
layout issue moves the loop to the wire layer and priming and records to the store.)
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
from urllib.parse import quote

import httpx

from . import _version
from ._atomic import PartFile, write_atomic
from ._clock import Clock, SystemClock
from ._http import (
    RETRYABLE_STATUSES,
    Rate,
    RetryPolicy,
    UpstreamUnavailable,
    get_logger,
    install_log_redaction,
    is_secret_header,
    is_secret_param,
    redact_text,
    redact_url,
    url_with_query,
)
from ._limiter import (
    HostLimit,
    HostLimiter,
    HostParked,
    Lessons,
    LimiterFactory,
    LimiterState,
    ceiling_for,
    is_pace_signal,
    plan_for,
)
from ._memo import AnswerMemo
from ._netguard import PrivateNetworkRefused, allow_private_network_default
from ._quota import QuotaDeferred, QuotaLedger
from ._store import CachedResponse, NotInCache, Recalled, ResponseStore
from ._transfer import (
    DEADLINE_PER_TIMEOUT,
    DEFAULT_MAX_BODY_BYTES,
    DEFAULT_MAX_JSON_BYTES,
    DEFAULT_MAX_JSON_DEPTH,
    BodyTooLarge,
    Bounds,
    DeadlineExceeded,
    Downloaded,
    EncodingRefused,
    HeadCheck,
    RedirectRefused,
    UnexpectedPayload,
    UnsafePayload,
    check_payload,
    send_bounded,
    stream_bounded,
)
from .files import Blob, File, FileKind, Saved
from .ids import ArticleIds
from .metadata import Related, SourceMetadata

if TYPE_CHECKING:
    from .operations.types import Fetcher, FileSource, Resolver

__all__ = ["CachedResponse", "NotInCache", "ResponseStore", "Session"]

log = get_logger("litfetch_df.session")


def is_deterministic(status_code: int) -> bool:
    """Return whether a response with this status may be cached (2xx, 3xx, 4xx but 429)."""
    return status_code < 500 and status_code != 429


def default_user_agent(contact: str | None) -> str:
    """Return ``litfetch_df/<version>``, plus `` (mailto:<contact>)`` when a contact is set."""
    base = f"litfetch_df/{_version.__version__}"
    return f"{base} (mailto:{contact})" if contact else base


@dataclass(frozen=True, slots=True)
class _Primed:
    """A request answered from memory: a synthesized response, or a failure reason."""

    response: CachedResponse | None
    failure: str | None
    # The request as primed; its redacted URL is written only if a caller asks for it.
    url: str = ""
    # As pairs, not a dict: a table primes tens of thousands of these.
    params: tuple[tuple[str, str | int], ...] = ()

    def shown_url(self) -> str:
        """The primed request's URL with its query, credentials redacted."""
        return redact_text(url_with_query(self.url, dict(self.params)))


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
    host_limits: Mapping[str, HostLimit] = field(default_factory=dict)
    limiters: dict[str, HostLimiter] = field(default_factory=dict)
    limiter_factory: LimiterFactory = HostLimiter
    # Keep the published per-kind ceilings of limits.py (Ceiling): off only in the limiter
    # sweep, which judges what the limiter learns of a drawn host.
    ceilings: bool = True
    # What earlier sessions on the same table learned of each host (see Lessons).
    lessons: Mapping[str, Lessons] = field(default_factory=dict)
    requests_sent: int = 0
    requests_by_host: dict[str, int] = field(default_factory=dict)
    # Answers a table-level caller derived from bulk lookups, by request key (see prime()).
    primed: dict[str, _Primed] = field(default_factory=dict)
    # What one attempt may cost and where its redirects may go (see litfetch_df._transfer).
    bounds: Bounds = field(default_factory=Bounds)
    # Small JSON answers the scopes got, shared by later scopes (_memo.py); None: off.
    memo: AnswerMemo | None = None
    # What each metered host has left today (or this week), kept beside the cache.
    quota: QuotaLedger | None = None


class _Default:
    """The type of a "not given" marker, where ``None`` is a meaningful value."""


_DEFAULT = _Default()


def _norm_params(params: Mapping[str, str | int] | None) -> list[tuple[str, str]]:
    return sorted((str(k), str(v)) for k, v in (params or {}).items())


def _secrets_of(
    params: Mapping[str, str | int] | None, headers: Mapping[str, str] | None
) -> list[str]:
    found = [str(v) for k, v in (params or {}).items() if is_secret_param(k) and str(v)]
    found += [v for k, v in (headers or {}).items() if is_secret_header(k) and v]
    return found


def request_key(
    method: str,
    url: str,
    params: Mapping[str, str | int] | None,
    headers: Mapping[str, str] | None,
    follow_redirects: bool,
    body: bytes | None,
) -> str:
    """Return the cache key of a request: a SHA-256 over its every part.

    Hashing keeps credentials (which are part of the request) out of any stored key.
    """
    material = jsonlib.dumps(
        [
            method.upper(),
            url,
            _norm_params(params),
            sorted((k.lower(), v) for k, v in (headers or {}).items()),
            bool(follow_redirects),
            hashlib.sha256(body).hexdigest() if body else None,
        ],
        separators=(",", ":"),
    )
    return hashlib.sha256(material.encode()).hexdigest()


RECORD_FORMAT = 1
"""Version of the per-id record entries (see :func:`record_key`); part of every record key,
so a change of their encoding makes older entries misses instead of misreadings."""

# A per-id record's stored "URL": what it is, never which id or credential.
_RECORD_URL = "litfetch-record:"


def record_key(kind: str, key: str) -> str:
    """Return the cache key of a bulk lookup's per-id answer: a SHA-256 over its parts.

    ``kind`` names the lookup (service and what shapes its answer), ``key`` the
    id in the lookup's comparison form. The material differs in shape from
    :func:`request_key`'s, so a record key never equals a request key.
    """
    material = jsonlib.dumps(["litfetch_df record", RECORD_FORMAT, kind, key])
    return hashlib.sha256(material.encode()).hexdigest()


class Session:
    """An async context manager owning the HTTP client and per-host pacing.

    ``client_factory`` builds the :class:`httpx.AsyncClient` (proxy, EZproxy,
    CA certificates); the default one sends a ``litfetch_df`` User-Agent with
    the ``contact`` mailto. ``retry`` governs :meth:`get`. ``cache`` is an
    optional persistent response store (a path or a
    :class:`~litfetch_df.cache.ResponseCache`); ``offline=True`` answers only
    from it; ``refresh=True`` ignores stored entries but still records new ones.

    Every host is paced by a limiter that learns its limit (ADR 0007), within
    the published ceilings of :mod:`litfetch_df.limits` for each kind of request
    (Springer Nature Basic's 100 a minute, Crossref's lists at 3/s);
    ``host_limits`` states what you know of a host's limit
    (``{"api.springernature.com": HostLimit(rate=5)}``), a ceiling it will
    never pass, and a rate given there replaces the table's (another plan).
    ``clock`` replaces the real clock (tests pass a virtual one).
    ``limiter_factory`` builds each host's limiter (default
    :class:`~litfetch_df._limiter.HostLimiter`); ``litfetch_df.dask`` passes
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

    With a ``memo`` (an :class:`~litfetch_df._memo.AnswerMemo`; see
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
            host_limits={h.lower(): v for h, v in (host_limits or {}).items()},
            limiter_factory=limiter_factory if limiter_factory is not None else HostLimiter,
            bounds=bounds,
            memo=memo,
            lessons=dict(lessons or {}),
        )
        clock_used = self._shared.clock
        self._shared.quota = QuotaLedger(
            _ledger_directory(store), now=clock_used.wall, quotas=quotas
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
        return self._shared.requests_sent

    @property
    def requests_by_host(self) -> dict[str, int]:
        """Network requests per host so far (a copy)."""
        return dict(self._shared.requests_by_host)

    @property
    def quota(self) -> QuotaLedger | None:
        """The ledger of published quotas this session spends (kept beside its cache)."""
        return self._shared.quota

    @property
    def limits(self) -> dict[str, LimiterState]:
        """How each host asked so far is paced right now: rate, ceiling, in-flight cap,
        requests, throttled answers, and whether it is paused or parked (snapshots)."""
        return {host: limiter.state() for host, limiter in self._shared.limiters.items()}

    def lessons(self) -> dict[str, Lessons]:
        """What each host's limiter has learned so far, for a later session to start from.

        Give it to that session as ``Session(lessons=...)``: its limiters then
        start at the pace, in-flight cap and ceilings these reached, instead of
        learning the hosts' limits again. The ``.lit`` calls on one table do this.
        """
        return {host: limiter.lessons() for host, limiter in self._shared.limiters.items()}

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
        if (response is None) == (failure is None):
            raise ValueError("prime() takes exactly one of response= or failure=")
        if response is not None and not is_deterministic(response.status_code):
            raise ValueError(
                f"a primed response must be deterministic, not HTTP {response.status_code}; "
                "prime a failure= instead"
            )
        key = request_key(method, url, params, headers, follow_redirects, body)
        if response is not None:
            self._shared.primed[key] = _Primed(response, None, url, tuple((params or {}).items()))
        else:
            reason = " ".join(str(failure).split()) or "no answer"
            self._shared.primed[key] = _Primed(None, reason)
        return key

    def is_primed(self, key: str) -> bool:
        """Whether a request keyed ``key`` (:meth:`prime`'s return) is primed, answer or failure."""
        return key in self._shared.primed

    def unprime(self, keys: Iterable[str]) -> None:
        """Forget the primed answers under ``keys`` (as returned by :meth:`prime`)."""
        primed = self._shared.primed
        for key in keys:
            primed.pop(key, None)

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
        (:class:`~litfetch_df._store.HeldAnswers`). Only a request primed as
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
        entry = shared.store.load(record_key(kind, key))
        if entry is None or not entry.url.startswith(_RECORD_URL):
            return None
        try:
            body = jsonlib.loads(entry.content)
        except ValueError:
            return None
        if not isinstance(body, dict) or "record" not in body:
            return None
        return Recalled(body["record"])

    def keep_record(self, kind: str, key: str, value: Any, *, secrets: Sequence[str] = ()) -> None:
        """Store what a bulk lookup's service said about one id (``None``: no such id).

        ``value`` must be JSON-able. Kept only with a persistent cache, and never
        when it holds one of ``secrets`` (the credentials the batch request
        carried): a scrubbed record would answer differently from the real one.
        A failure to store is logged, never raised.
        """
        store = self._shared.store
        if store is None:
            return
        try:
            text = jsonlib.dumps({"record": value}, separators=(",", ":"), ensure_ascii=False)
        except (TypeError, ValueError):
            log.warning("not caching a per-id answer that is not JSON")
            return
        if any(
            form in text
            for secret in secrets
            if secret
            for form in (secret, quote(secret, safe=""))
        ):
            log.debug("not caching a per-id answer that echoes a credential")
            return
        entry = CachedResponse(
            status_code=200,
            headers=(("content-type", "application/json"),),
            content=text.encode(),
            url=_RECORD_URL + kind,
        )
        try:
            store.save(record_key(kind, key), entry, secrets=[s for s in secrets if s])
        except Exception as exc:  # a cache must never fail the lookup it serves
            log.warning("could not store a per-id answer in the cache: %s", type(exc).__name__)

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
            return _Replayed(primed.response, method, primed.shown_url)
        if memo is not None:
            kept = memo.load(key)
            if kept is not None:
                return _Replayed(kept, method)
        entry = self._stored(key, method, url, params)
        if entry is not None:
            return _Replayed(entry, method)
        store = shared.store
        response = await self._send_with_retries(method, url, params, headers, rate, follow, body)
        if _cacheable(response.status_code, rate) and (store is not None or memo is not None):
            entry = CachedResponse(
                status_code=response.status_code,
                headers=tuple(
                    (k, v)
                    for k, v in response.headers.items()
                    if not is_secret_header(k) and k.lower() not in _HOP_HEADERS
                ),
                content=response.content,
                url=redact_url(response.url),
            )
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

        Returns :class:`~litfetch_df._transfer.Downloaded`: the final status
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
        sink: _DigestSink | None = None

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
            sink = _DigestSink(part)
            response = await self._send_with_retries(
                "GET", url, None, None, rate, follow_redirects, None, send=attempt
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
        replayed = _Replayed(entry, "GET")
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

    def _limiter(self, host: str, rate: Rate) -> HostLimiter:
        shared = self._shared
        limiter = shared.limiters.get(host)
        if limiter is None:
            plan = plan_for(host, rate, shared.host_limits.get(host.lower()))
            limiter = shared.limiter_factory(host, plan, shared.clock, shared.retry)
            learned = shared.lessons.get(host)
            if learned is not None:
                limiter.resume(learned)
            shared.limiters[host] = limiter
        return limiter

    async def _send_with_retries(
        self,
        method: str,
        url: str,
        params: Mapping[str, str | int] | None,
        headers: Mapping[str, str] | None,
        rate: Rate,
        follow: bool,
        body: bytes | None,
        send: Callable[[httpx.AsyncClient], Awaitable[httpx.Response]] | None = None,
    ) -> httpx.Response:
        shared = self._shared
        client = self.client
        policy = shared.retry
        host = httpx.URL(url).host
        limiter = self._limiter(host, rate)
        # The published ceiling of this kind of request (limits.py), kept whatever the pace;
        # a rate the caller gives for the host (its own plan, e.g. Springer Premium) stands.
        known = shared.host_limits.get(host.lower())
        ceiling = None
        if shared.ceilings and (known is None or known.rate is None):
            target = httpx.URL(url).copy_merge_params(params or {})  # as the client sends it
            ceiling = ceiling_for(host, target.path, dict(target.params))
        shown = redact_url(httpx.URL(url, params=params or {}))
        was_throttled = False
        for attempt in range(policy.max_attempts):
            last = attempt + 1 == policy.max_attempts
            # Set instead of raised inside ``except``: the transport's exception (whose
            # request holds the unredacted URL) must not ride along as __context__.
            given_up: str | None = None
            response: httpx.Response | None = None
            if shared.quota is not None:
                try:
                    shared.quota.reserve(host, httpx.URL(url).path, params)
                except QuotaDeferred as spent:
                    # Not sent: the budget is spent until its reset, whatever the pace.
                    self._note_failure(f"deferred: {spent}")
                    raise QuotaDeferred(f"{spent}: {method} {shown}") from None
            try:
                ticket = await limiter.acquire(ceiling)
            except HostParked as parked:
                _release(shared.quota, host, url, params)
                reason = _reason(parked, host)
                self._note_failure(reason)
                raise HostParked(f"{reason}: {method} {shown}") from None
            except BaseException:
                # Cancelled (an interrupt, a deadline of the caller's) before sending.
                _release(shared.quota, host, url, params)
                raise
            try:
                shared.requests_sent += 1
                shared.requests_by_host[host] = shared.requests_by_host.get(host, 0) + 1
                log.debug("%s %s (attempt %d)", method, shown, attempt + 1)
                if send is not None:
                    response = await send(client)
                else:
                    response = await send_bounded(
                        client,
                        method,
                        url,
                        params=params,
                        headers=headers,
                        content=body,
                        follow_redirects=follow,
                        bounds=shared.bounds,
                        clock=shared.clock,
                    )
            except httpx.TransportError as exc:
                if last:
                    # The bounds' own messages say what was wrong and name the host.
                    ours = isinstance(exc, DeadlineExceeded | UnexpectedPayload) and bool(str(exc))
                    what = (
                        f"{type(exc).__name__}: {exc}"
                        if ours
                        else f"{type(exc).__name__} from {host}"
                    )
                    given_up = f"{what} after {policy.max_attempts} attempts"
                else:
                    log.info("%s on %s %s; retrying", type(exc).__name__, method, shown)
            except (
                BodyTooLarge,
                RedirectRefused,
                EncodingRefused,
                PrivateNetworkRefused,
                UnsafePayload,
            ) as exc:
                # Their messages say why and never hold a URL or a key.
                given_up = f"{type(exc).__name__}: {_reason(exc, host)}"
            except httpx.RequestError as exc:
                given_up = f"{type(exc).__name__} from {host}"
            except BaseException:
                # Cancelled mid-send, or anything else no answer came from: the call held
                # for it goes back, or a notebook's later cells would find the budget short.
                _release(shared.quota, host, url, params)
                raise
            finally:
                limiter.release(ticket)
            if given_up is not None:
                _release(shared.quota, host, url, params)
                self._note_failure(given_up)
                raise UpstreamUnavailable(f"{given_up}: {method} {shown}")
            if response is None:
                _release(shared.quota, host, url, params)
                await shared.clock.sleep(policy.backoff(attempt))
                continue
            status = response.status_code
            if shared.quota is not None and shared.quota.observe(
                host, httpx.URL(url).path, params, status, response.headers, _head(response)
            ):
                # A spent budget is no throttle: the host's pace stays as it was learned.
                await response.aclose()
                reason = shared.quota.reason_for(host, httpx.URL(url).path, params)
                self._note_failure(f"deferred: {reason}")
                raise QuotaDeferred(f"{reason}: {method} {shown}")
            # Only a pace signal slows the host; a 5xx without Retry-After is a fault, retried
            # with a back-off below (ADR 0007).
            throttled = is_pace_signal(host, status, response.headers, rate.transient_statuses)
            parked_reason = limiter.observe(
                ticket, status, response.headers, throttled=throttled, retry=was_throttled
            )
            was_throttled = was_throttled or throttled
            if parked_reason is not None and throttled:
                # The host asked for longer than the budget: obey it, and let the row say so.
                parked_reason = parked_reason.strip() or f"{host} is parked"
                await response.aclose()
                self._note_failure(parked_reason)
                log.warning("%s; its requests are given up until then", parked_reason)
                raise HostParked(f"{parked_reason}: {method} {shown}")
            if status not in RETRYABLE_STATUSES and status not in rate.transient_statuses:
                return response
            if last:
                self._note_failure(
                    f"HTTP {status} from {host} after {policy.max_attempts} attempts"
                )
                log.warning(
                    "HTTP %d from %s %s after %d attempts", status, method, shown, attempt + 1
                )
                return response
            await response.aclose()
            if throttled:
                # The limiter holds the whole host; the next acquire() waits the pause out.
                log.info("HTTP %d on %s %s; host paused, retrying after", status, method, shown)
                continue
            delay = policy.backoff(attempt)
            log.info("HTTP %d on %s %s; retrying in %.2fs", status, method, shown, delay)
            await shared.clock.sleep(delay)
        raise AssertionError("unreachable")  # pragma: no cover

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


def _release(
    ledger: QuotaLedger | None, host: str, url: str, params: Mapping[str, str | int] | None
) -> None:
    """Give back the quota call held for a request that got no answer."""
    if ledger is not None:
        ledger.release(host, httpx.URL(url).path, params)


def _reason(exc: BaseException, host: str) -> str:
    """Return why ``exc`` gave a request up: its message, or its type and the host when blank."""
    text = " ".join(str(exc).split())
    return text or f"{type(exc).__name__} from {host}"


# How many failure reasons a session (not a scope) keeps; see Session.failures.
_SESSION_FAILURES_KEPT = 50

# The stored content is already decoded, so its transfer framing must not be replayed.
_HOP_HEADERS = frozenset({"content-encoding", "content-length", "transfer-encoding", "set-cookie"})


class _Replayed(httpx.Response):
    """A response served from memory or the cache; its request is built only if asked for.

    Parsing the stored URL into an ``httpx.Request`` is most of the cost of a
    replayed answer, and the bundled sources never look at it.
    """

    def __init__(
        self, entry: CachedResponse, method: str, url: Callable[[], str] | None = None
    ) -> None:
        # Given as a stream, then marked read: the content is already whole and decoded,
        # so running it through httpx's decoders (what content= does) is wasted work.
        super().__init__(
            status_code=entry.status_code,
            headers=list(entry.headers),
            stream=httpx.ByteStream(entry.content),
        )
        self._content = entry.content
        self.is_stream_consumed = True
        self.is_closed = True
        self._replayed_from: tuple[str, str | Callable[[], str]] = (
            method,
            entry.url if url is None else url,
        )

    @property  # type: ignore[override]
    def request(self) -> httpx.Request:
        if self._request is None:
            method, url = self._replayed_from
            self._request = httpx.Request(method, url if isinstance(url, str) else url())
        return self._request

    @request.setter
    def request(self, value: httpx.Request) -> None:
        self._request = value


class _DigestSink:
    """Where a download goes: a ``.part`` file, its bytes counted and hashed on the way."""

    def __init__(self, part: PartFile) -> None:
        self._part = part
        self.size = 0
        self.digest = hashlib.sha256()

    def rewind(self) -> None:
        self._part.rewind()
        self.size = 0
        self.digest = hashlib.sha256()

    def write(self, data: bytes, /) -> None:
        # A plain write: it lands in the page cache in microseconds, far below a handoff
        # to a thread per chunk.
        self._part.fh.write(data)
        self.size += len(data)
        self.digest.update(data)


def _cacheable(status_code: int, rate: Rate) -> bool:
    return is_deterministic(status_code) and status_code not in rate.transient_statuses


def _ledger_directory(store: ResponseStore | None) -> Path | None:
    """The directory the quota ledger is kept in: the persistent cache's, if any."""
    path = getattr(store, "path", None)
    return Path(path).parent if isinstance(path, str | Path) else None


def _head(response: httpx.Response) -> bytes:
    """The first bytes of an answer already read (a quota 429 says why in its body)."""
    try:
        return response.content[:2048]
    except httpx.ResponseNotRead:
        return b""


def _open_store(cache: Any, ttl: float | None) -> ResponseStore | None:
    if cache is None or cache is False:
        return None
    if hasattr(cache, "load") and hasattr(cache, "save"):
        return cache  # type: ignore[no-any-return]
    from .cache import open_cache

    return open_cache(cache, ttl=ttl)
