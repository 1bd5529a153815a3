"""The send-and-retry loop: one request to the network, paced per host, retried, bounded.

A :class:`Sender` is what a :class:`~litfetch_df.session.Session` and all its
scopes share for the network: the host limiters (ADR 0007), the retry policy,
the clock, the bounds of an attempt, the count of requests per host, and the
quota budget a metered host spends. :meth:`Sender.send` is the loop: hold a
call against the budget, wait for the host's limiter, send one bounded attempt,
read what the answer says about the host's pace and quota, and retry what may be
retried. It knows no cache and no primed answer: the session asks those first.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Mapping
from typing import Protocol

import httpx

from .clock import Clock
from .http import (
    RETRYABLE_STATUSES,
    QuotaDeferred,
    Rate,
    RetryPolicy,
    UpstreamUnavailable,
    get_logger,
    redact_url,
)
from .limiter import (
    HostLimit,
    HostLimiter,
    HostParked,
    Lessons,
    LimiterFactory,
    ceiling_for,
    is_pace_signal,
    plan_for,
)
from .netguard import PrivateNetworkRefused
from .transfer import (
    BodyTooLarge,
    Bounds,
    DeadlineExceeded,
    EncodingRefused,
    RedirectRefused,
    UnexpectedPayload,
    UnsafePayload,
    send_bounded,
)

__all__ = ["Budget", "Note", "Send", "Sender", "given_up_reason"]

# The session's logger name: the lines a user filters on did not move with the code.
log = get_logger("litfetch_df.session")

Note = Callable[[str], None]
"""Where a given-up request's reason goes (the asking scope's ``failures``)."""

Send = Callable[[httpx.AsyncClient], Awaitable[httpx.Response]]
"""One attempt of a request other than :func:`~litfetch_df.wire.transfer.send_bounded`'s
(a streamed download)."""


class Budget(Protocol):
    """A quota ledger as the loop spends it (:class:`~litfetch_df.store.quota.QuotaLedger`)."""

    def reserve(self, host: str, path: str, params: Mapping[str, object] | None) -> None:
        """Hold one call for a request about to be sent; raise QuotaDeferred when spent."""

    def release(self, host: str, path: str, params: Mapping[str, object] | None) -> None:
        """Give back the call held for a request that got no answer."""

    def reason_for(self, host: str, path: str, params: Mapping[str, object] | None) -> str:
        """Why a request of this kind is deferred (``<host> daily quota, resets in ...``)."""

    def observe(
        self,
        host: str,
        path: str,
        params: Mapping[str, object] | None,
        status: int,
        headers: httpx.Headers,
        head: bytes,
    ) -> bool:
        """Read an answer's quota headers; whether it says the budget is spent."""


class Sender:
    """The network side a session and its scopes share (see the module's docstring).

    ``client`` returns the open :class:`httpx.AsyncClient`; ``host_limits``
    (lower-case host names) are ceilings the caller states; ``lessons`` start
    a host's limiter where an earlier session's left off; ``budget`` is the
    quota ledger, or ``None`` for none. ``ceilings`` keeps each request within the
    published ceiling of its kind (:mod:`litfetch_df.limits`, :func:`ceiling_for`);
    only the limiter sweep turns it off, to judge what the limiter learns alone.
    """

    def __init__(
        self,
        *,
        client: Callable[[], httpx.AsyncClient],
        retry: RetryPolicy,
        clock: Clock,
        bounds: Bounds,
        host_limits: Mapping[str, HostLimit],
        limiter_factory: LimiterFactory,
        lessons: Mapping[str, Lessons],
        budget: Budget | None,
    ) -> None:
        self._client = client
        self.retry = retry
        self.clock = clock
        self.bounds = bounds
        self.budget = budget
        self._host_limits = dict(host_limits)
        self._factory = limiter_factory
        self._lessons = dict(lessons)
        self.limiters: dict[str, HostLimiter] = {}
        self.requests_sent = 0
        self.requests_by_host: dict[str, int] = {}
        self.ceilings = True

    def limiter(self, host: str, rate: Rate) -> HostLimiter:
        """The host's limiter, made on the first request to it."""
        limiter = self.limiters.get(host)
        if limiter is None:
            plan = plan_for(host, rate, self._host_limits.get(host.lower()))
            limiter = self._factory(host, plan, self.clock, self.retry)
            learned = self._lessons.get(host)
            if learned is not None:
                limiter.resume(learned)
            self.limiters[host] = limiter
        return limiter

    def _release(self, host: str, url: str, params: Mapping[str, str | int] | None) -> None:
        if self.budget is not None:
            self.budget.release(host, httpx.URL(url).path, params)

    async def send(
        self,
        method: str,
        url: str,
        params: Mapping[str, str | int] | None,
        headers: Mapping[str, str] | None,
        rate: Rate,
        follow: bool,
        body: bytes | None,
        *,
        note: Note,
        send: Send | None = None,
    ) -> httpx.Response:
        """Send a request to the network until it is answered or given up; return the answer.

        A retryable status that outlived every retry is returned as is. Raises
        :class:`~litfetch_df.wire.http.QuotaDeferred` (the budget is spent),
        :class:`~litfetch_df.wire.limiter.HostParked` (the host asked for a
        longer pause than the budget allows) or
        :class:`~litfetch_df.wire.http.UpstreamUnavailable` (every attempt
        failed, or an attempt passed a bound), each after giving its reason to
        ``note``.
        """
        client = self._client()
        policy = self.retry
        host = httpx.URL(url).host
        limiter = self.limiter(host, rate)
        # The published ceiling of this kind of request (limits.py), kept whatever the pace;
        # a rate the caller gives for the host (its own plan, e.g. Springer Premium) stands.
        known = self._host_limits.get(host.lower())
        ceiling = None
        if self.ceilings and (known is None or known.rate is None):
            target = httpx.URL(url).copy_merge_params(params or {})  # as the client sends it
            ceiling = ceiling_for(host, target.path, dict(target.params))
        shown = redact_url(httpx.URL(url, params=params or {}))
        budget = self.budget
        was_throttled = False
        for attempt in range(policy.max_attempts):
            last = attempt + 1 == policy.max_attempts
            # Set instead of raised inside ``except``: the transport's exception (whose
            # request holds the unredacted URL) must not ride along as __context__.
            given_up: str | None = None
            response: httpx.Response | None = None
            if budget is not None:
                try:
                    budget.reserve(host, httpx.URL(url).path, params)
                except QuotaDeferred as spent:
                    # Not sent: the budget is spent until its reset, whatever the pace.
                    note(f"deferred: {spent}")
                    raise QuotaDeferred(f"{spent}: {method} {shown}") from None
            try:
                ticket = await limiter.acquire(ceiling)
            except HostParked as parked:
                self._release(host, url, params)
                reason = given_up_reason(parked, host)
                note(reason)
                raise HostParked(f"{reason}: {method} {shown}") from None
            except BaseException:
                # Cancelled (an interrupt, a deadline of the caller's) before sending.
                self._release(host, url, params)
                raise
            try:
                self.requests_sent += 1
                self.requests_by_host[host] = self.requests_by_host.get(host, 0) + 1
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
                        bounds=self.bounds,
                        clock=self.clock,
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
                given_up = f"{type(exc).__name__}: {given_up_reason(exc, host)}"
            except httpx.RequestError as exc:
                given_up = f"{type(exc).__name__} from {host}"
            except BaseException:
                # Cancelled mid-send, or anything else no answer came from: the call held
                # for it goes back, or a notebook's later cells would find the budget short.
                self._release(host, url, params)
                raise
            finally:
                limiter.release(ticket)
            if given_up is not None:
                self._release(host, url, params)
                note(given_up)
                raise UpstreamUnavailable(f"{given_up}: {method} {shown}")
            if response is None:
                self._release(host, url, params)
                await self.clock.sleep(policy.backoff(attempt))
                continue
            status = response.status_code
            if budget is not None and budget.observe(
                host, httpx.URL(url).path, params, status, response.headers, _head(response)
            ):
                # A spent budget is no throttle: the host's pace stays as it was learned.
                await response.aclose()
                reason = budget.reason_for(host, httpx.URL(url).path, params)
                note(f"deferred: {reason}")
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
                note(parked_reason)
                log.warning("%s; its requests are given up until then", parked_reason)
                raise HostParked(f"{parked_reason}: {method} {shown}")
            if status not in RETRYABLE_STATUSES and status not in rate.transient_statuses:
                return response
            if last:
                note(f"HTTP {status} from {host} after {policy.max_attempts} attempts")
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
            await self.clock.sleep(delay)
        raise AssertionError("unreachable")  # pragma: no cover


def given_up_reason(exc: BaseException, host: str) -> str:
    """Why ``exc`` gave a request up: its message, or its type and the host when blank."""
    text = " ".join(str(exc).split())
    return text or f"{type(exc).__name__} from {host}"


def _head(response: httpx.Response) -> bytes:
    """The first bytes of an answer already read (a quota 429 says why in its body)."""
    try:
        return response.content[:2048]
    except httpx.ResponseNotRead:
        return b""
