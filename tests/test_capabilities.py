"""Capability checks see what a forwarding wrapper offers, on every supported Python.

Since Python 3.12 ``isinstance`` against a runtime protocol looks attributes up
statically, so the source-tracking wrapper ``Watched`` (which forwards through
``__getattr__``) lost the session's ``held``, ``post``, ``download_to`` and
per-id records: every bulk answer was ignored and each row asked again (found
by ``make test-newest`` on 3.13). The checks below are what the sources use.
"""

from __future__ import annotations

from typing import Any

import httpx
import pytest

from litfetch_df import Session
from litfetch_df.operations.tried import Watched
from litfetch_df.store.answers import can_hold, keeps_records
from litfetch_df.wire.http import can_post, offers
from litfetch_df.wire.transfer import can_download


class _GetOnly:
    """An ``Http`` with nothing beyond ``get`` and ``contact``."""

    contact = None

    async def get(self, url: str, **_: Any) -> httpx.Response:
        raise AssertionError("not sent")


CHECKS = (can_post, can_hold, keeps_records, can_download)


@pytest.mark.parametrize("check", CHECKS, ids=lambda c: c.__name__)
def test_a_session_and_a_wrapped_session_offer_every_capability(check: Any) -> None:
    session = Session()
    assert check(session)
    assert check(Watched(session))  # forwarded through __getattr__


@pytest.mark.parametrize("check", CHECKS, ids=lambda c: c.__name__)
def test_a_wrapper_offers_no_more_than_it_wraps(check: Any) -> None:
    assert not check(_GetOnly())
    assert not check(Watched(_GetOnly()))


def test_offers_needs_every_name_callable() -> None:
    class Half:
        held = None  # present, not callable

        def post(self) -> None: ...

    assert offers(Half(), "post")
    assert not offers(Half(), "post", "held")
    assert not offers(Half(), "download_to")
