"""The sync bridge: works in and out of running loops and threads; interrupts stop cleanly."""

from __future__ import annotations

import _thread
import asyncio
import threading
from collections.abc import Iterator

import httpx
import pandas as pd
import pytest

import litfetch_df.frame  # registers .lit
from litfetch_df import Session
from litfetch_df.frame.engine.bridge import run_sync
from tests.conftest import FAST_RETRY
from tests.fake_upstream import FakeUpstream
from tests.test_frame_pipeline import JATS, EpmcFetcher, SlowFetcher, install, session_for

assert litfetch_df.frame


@pytest.fixture
def world(fake: FakeUpstream) -> Iterator[FakeUpstream]:
    install(fake)
    yield fake


def bridge_threads() -> list[threading.Thread]:
    return [t for t in threading.enumerate() if t.name.startswith("litfetch_df-")]


async def answer(value: int) -> int:
    await asyncio.sleep(0)
    return value


def test_run_sync_in_a_plain_script() -> None:
    assert run_sync(lambda: answer(7)) == 7
    assert bridge_threads() == []


async def test_run_sync_inside_a_running_loop() -> None:
    # what a Jupyter cell does: a sync call while this thread's loop is running
    assert asyncio.get_running_loop().is_running()
    assert run_sync(lambda: answer(8)) == 8


def test_run_sync_from_a_thread() -> None:
    results: list[int] = []
    workers = [
        threading.Thread(target=lambda: results.append(run_sync(lambda: answer(9))))
        for _ in range(3)
    ]
    for w in workers:
        w.start()
    for w in workers:
        w.join(10)
    assert results == [9, 9, 9]


def test_exceptions_cross_the_bridge() -> None:
    async def fail() -> None:
        raise LookupError("nope")

    with pytest.raises(LookupError, match="nope"):
        run_sync(fail)
    assert bridge_threads() == []


async def test_accessor_sync_call_inside_a_running_loop(world: FakeUpstream) -> None:
    df = pd.DataFrame({"pmcid": ["PMC7000001"]})
    out = df.lit.fetch_bodies(
        fetchers=[EpmcFetcher()], resolve=False, session=session_for(world), progress=False
    )
    assert out.loc[0, "body"].content == JATS


def test_accessor_sync_call_from_threads(world: FakeUpstream) -> None:
    df = pd.DataFrame({"pmcid": ["PMC7000001", "PMC7000002"]})
    outs: list[pd.DataFrame] = []

    def work() -> None:
        outs.append(
            df.lit.fetch_bodies(
                fetchers=[EpmcFetcher()], resolve=False, session=session_for(world), progress=False
            )
        )

    threads = [threading.Thread(target=work) for _ in range(2)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(20)
    assert len(outs) == 2
    for out in outs:
        assert out["body_source"].tolist() == ["europe_pmc", "europe_pmc"]


def interrupt_soon(delay: float) -> threading.Timer:
    """Deliver a KeyboardInterrupt to the main thread after ``delay`` (like Ctrl-C)."""
    timer = threading.Timer(delay, _thread.interrupt_main)
    timer.start()
    return timer


def test_interrupt_cancels_closes_and_reraises(world: FakeUpstream) -> None:
    assert threading.current_thread() is threading.main_thread()
    clients: list[httpx.AsyncClient] = []
    factory = world.client_factory()

    def tracking_factory() -> httpx.AsyncClient:
        client = factory()
        clients.append(client)
        return client

    session = Session(client_factory=tracking_factory, retry=FAST_RETRY)
    # Ctrl-C once the fourth fetch has begun: at a point of the work, not after a delay.
    slow = SlowFetcher(on_started=4, then=_thread.interrupt_main)
    df = pd.DataFrame({"pmcid": [f"PMC{7000001 + i}" for i in range(8)]})
    with pytest.raises(KeyboardInterrupt):
        df.lit.fetch_bodies(
            fetchers=[slow], resolve=False, session=session, progress=False, concurrency=4
        )
    assert slow.started == 4  # the work had begun (bounded by concurrency) ...
    assert slow.cancelled == 4  # ... and every fetch was cancelled, none waited out
    assert bridge_threads() == []  # no worker thread left behind
    assert len(clients) == 1 and clients[0].is_closed  # connections closed
    with pytest.raises(RuntimeError):
        session.client  # noqa: B018 - the session was exited


def test_interrupt_of_run_sync_cancels_the_coroutine() -> None:
    cancelled = threading.Event()

    async def forever() -> None:
        try:
            await asyncio.sleep(60)
        except asyncio.CancelledError:
            cancelled.set()
            raise

    timer = interrupt_soon(0.2)
    with pytest.raises(KeyboardInterrupt):
        run_sync(forever)
    timer.join()
    assert cancelled.is_set()
    assert bridge_threads() == []


def test_a_session_can_be_reused_across_sync_calls(world: FakeUpstream) -> None:
    session = session_for(world)
    df = pd.DataFrame({"pmcid": ["PMC7000001"]})
    for _ in range(2):
        out = df.lit.fetch_bodies(
            fetchers=[EpmcFetcher()], resolve=False, session=session, progress=False
        )
        assert out.loc[0, "body_source"] == "europe_pmc"
