"""What each source did for one article: answered (a hit or a miss) or was given up.

A step that asks several sources (the file-set's sources, the body ladder's
rungs) can keep what some found while another failed. To say so, and to ask
only the failed ones again later, it needs each source's own account: a
:class:`Tried` per source asked. :class:`Watched` is the :class:`Http` one
source asks through; it notes every request of that source given up after
its retries (a transport failure, or a retryable status the session returned
once its attempts were spent), whether or not the source itself lets the
failure through.
"""

from __future__ import annotations

import dataclasses
import enum
from collections.abc import Mapping
from typing import Any

import httpx

from ..store.quota import QuotaDeferred
from ..wire.http import RETRYABLE_STATUSES, Http, Rate

__all__ = ["Answer", "Tried", "Watched"]


class Answer(enum.Enum):
    """How one source ended for one article."""

    HIT = "hit"
    """It answered with something."""
    MISS = "miss"
    """It answered: it has nothing for the article."""
    GIVEN_UP = "given up"
    """A request of it failed after every retry: what it has is unknown."""


@dataclasses.dataclass(frozen=True, slots=True)
class Tried:
    """One source asked for one article: its ``source`` name, its :class:`Answer`, and why.

    ``reason`` says why a source was given up (the first request of it that
    failed); it is ``None`` for an answer.
    """

    source: str
    answer: Answer
    reason: str | None = None

    @property
    def given_up(self) -> bool:
        """Whether the source was given up (a re-run should ask it again)."""
        return self.answer is Answer.GIVEN_UP


class Watched:
    """An :class:`Http` that forwards to ``http`` and notes each request given up.

    ``reasons`` holds, in order, why each given-up request of this wrapper
    failed. Whatever else ``http`` offers (``post``, ``held``) is forwarded,
    so a source's capability checks see what ``http`` offers.
    """

    def __init__(self, http: Http) -> None:
        self._http = http
        self.reasons: list[str] = []

    @property
    def contact(self) -> str | None:
        """The wrapped session's contact email."""
        return self._http.contact

    def _note(self, response: httpx.Response, rate: Rate) -> httpx.Response:
        status = response.status_code
        # The session returns a retryable status only once its attempts are spent.
        if status in RETRYABLE_STATUSES or status in rate.transient_statuses:
            host = response.request.url.host if _has_request(response) else "the host"
            self.reasons.append(f"HTTP {status} from {host} after retries")
        return response

    async def get(
        self,
        url: str,
        *,
        params: Mapping[str, str | int] | None = None,
        headers: Mapping[str, str] | None = None,
        rate: Rate = Rate.DEFAULT,
        follow_redirects: bool = False,
    ) -> httpx.Response:
        """The wrapped GET; a request given up is noted (and its exception re-raised)."""
        try:
            response = await self._http.get(
                url, params=params, headers=headers, rate=rate, follow_redirects=follow_redirects
            )
        except httpx.TransportError as exc:
            self.reasons.append(_why(exc))
            raise
        return self._note(response, rate)

    def __getattr__(self, name: str) -> Any:
        # Only what the wrapped object has: ``hasattr`` (and so the capability checks,
        # ``can_post``, ``can_hold``, ...) answers as it would for ``http``. Not a runtime
        # protocol check: since Python 3.12 those never see ``__getattr__``.
        attr = getattr(self._http, name)
        if name != "post":
            return attr

        async def post(*args: Any, rate: Rate = Rate.DEFAULT, **kwargs: Any) -> httpx.Response:
            try:
                response = await attr(*args, rate=rate, **kwargs)
            except httpx.TransportError as exc:
                self.reasons.append(_why(exc))
                raise
            return self._note(response, rate)

        return post

    def tried(self, source: str, found: bool, failure: BaseException | None = None) -> Tried:
        """This source's :class:`Tried`: given up when a request of it was, or it raised."""
        if self.reasons:
            # Even with something found: what the failed request would have added is unknown.
            return Tried(source, Answer.GIVEN_UP, self.reasons[0])
        if failure is not None:
            return Tried(source, Answer.GIVEN_UP, _why(failure))
        return Tried(source, Answer.HIT if found else Answer.MISS)


def _has_request(response: httpx.Response) -> bool:
    try:
        response.request  # noqa: B018 - raises when the response was built without one
    except RuntimeError:
        return False
    return True


def _why(exc: BaseException) -> str:
    text = str(exc) or type(exc).__name__
    # A spent quota is a deferral (the row is done again after the reset), not a loss.
    return f"deferred: {text}" if isinstance(exc, QuotaDeferred) else text
