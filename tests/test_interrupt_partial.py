"""An interrupted sync call hands back what it finished: ``Interrupted.partial``.

The interrupt is raised from inside the work, once the rows meant to finish
have finished, so the tests do not depend on timing. Each test then passes
the partial frame to the same call again and checks that only the
interrupted rows are worked.
"""

from __future__ import annotations

import _thread
import asyncio
import threading
from collections.abc import Iterator, Mapping, Sequence
from typing import Any

import pandas as pd
import pytest

import litfetch_df
from litfetch_df import ArticleIds, Blob, Http, Interrupted
from litfetch_df.frame.engine.bridge import offer_partial, run_sync
from litfetch_df.frame.engine.pipeline import is_abandoned
from litfetch_df.frame.engine.steps import resolve as resolve_step
from tests.fake_upstream import FakeUpstream
from tests.test_frame_pipeline import EpmcFetcher, install, session_for

FAST = ("PMC7000001", "PMC7000002")
HANG = "PMC7000003"


@pytest.fixture
def world(fake: FakeUpstream) -> Iterator[FakeUpstream]:
    install(fake)
    yield fake


class InterruptingFetcher:
    """Europe PMC full text; ``hang`` rows wait for the others, press Ctrl-C, and never end."""

    name = "europe_pmc"
    requires = frozenset({"pmcid"})

    def __init__(self, hang: frozenset[str] = frozenset(), fast: int = 0) -> None:
        self.hang = hang
        self.fast = fast
        self.calls: list[str | None] = []
        self._done = 0
        self._all_done: asyncio.Event | None = None

    async def fetch(
        self,
        article_ids: ArticleIds,
        *,
        credentials: Mapping[str, object] | None = None,
        http: Http,
    ) -> Blob | None:
        if self._all_done is None:
            self._all_done = asyncio.Event()
        self.calls.append(article_ids.pmcid)
        if article_ids.pmcid in self.hang:
            await self._all_done.wait()
            await asyncio.sleep(0.05)  # let the fast units record their outcomes
            _thread.interrupt_main()
            await asyncio.sleep(60)
        blob = await EpmcFetcher().fetch(article_ids, http=http)
        self._done += 1
        if self._done >= self.fast:
            self._all_done.set()
        return blob


def frame() -> pd.DataFrame:
    return pd.DataFrame(
        {
            "pmcid": [FAST[0], HANG, "not-a-pmcid", FAST[1], None, f"pmc{FAST[0][3:]}"],
            "title": list("abcdef"),
        },
        index=[10, 11, 12, 13, 14, 15],
    )


def check_partial(partial: pd.DataFrame, original: pd.DataFrame) -> None:
    assert list(partial.index) == list(original.index)  # every row, in order
    assert partial["title"].tolist() == original["title"].tolist()
    sources = partial["body_source"].tolist()
    errors = partial["body_error"].tolist()
    assert sources[0] == sources[3] == sources[5] == "europe_pmc"  # finished, duplicates too
    assert pd.isna(sources[1]) and is_abandoned(errors[1]) and "interrupted" in errors[1]
    assert "invalid pmcid" in errors[2] and not is_abandoned(errors[2])
    assert pd.isna(errors[4])  # no id: nothing to do, and no error


def test_an_interrupted_step_hands_back_its_finished_rows(world: FakeUpstream) -> None:
    assert threading.current_thread() is threading.main_thread()
    df = frame()
    first = InterruptingFetcher(hang=frozenset({HANG}), fast=2)
    with pytest.raises(Interrupted) as caught:
        df.lit.fetch_bodies(
            fetchers=[first], resolve=False, session=session_for(world), progress=False
        )
    assert isinstance(caught.value, KeyboardInterrupt)  # still stops a script or a cell
    partial = caught.value.partial
    assert isinstance(partial, pd.DataFrame)
    check_partial(partial, df)

    again = InterruptingFetcher()
    out = partial.lit.fetch_bodies(
        fetchers=[again], resolve=False, session=session_for(world), progress=False
    )
    assert again.calls == [HANG]  # only the interrupted row is worked again
    sources = out["body_source"].tolist()
    assert sources[0] == sources[3] == sources[5] == "europe_pmc"  # kept from the partial
    assert pd.isna(sources[1]) and pd.isna(out["body_error"].tolist()[1])  # 404: an answer


def test_an_interrupted_run_hands_back_its_finished_rows(world: FakeUpstream) -> None:
    df = frame()
    first = InterruptingFetcher(hang=frozenset({HANG}), fast=2)
    with pytest.raises(Interrupted) as caught:
        df.lit.run(steps="bodies", fetchers=[first], session=session_for(world), progress=False)
    partial = caught.value.partial
    assert isinstance(partial, pd.DataFrame)
    check_partial(partial, df)

    again = InterruptingFetcher()
    out = partial.lit.run(
        steps="bodies", fetchers=[again], session=session_for(world), progress=False
    )
    assert again.calls == [HANG]
    assert out["body_source"].tolist()[3] == "europe_pmc"


def test_an_interrupted_resolve_keeps_its_finished_chunks(
    world: FakeUpstream, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(resolve_step, "RESOLVE_CHUNK", 2)
    calls: list[list[str | None]] = []

    async def batch(ids: Sequence[ArticleIds], http: Http) -> tuple[Sequence[ArticleIds], set[int]]:
        calls.append([i.doi for i in ids])
        if len(calls) == 2:  # the second chunk presses Ctrl-C and never answers
            _thread.interrupt_main()
            await asyncio.sleep(60)
        return [ArticleIds(pmid=str(30000000 + len(calls))) for _ in ids], set()

    dois = ["10.1000/a", "10.1000/b", "10.1000/c", "10.1000/d"]
    df = pd.DataFrame({"doi": dois})
    with pytest.raises(Interrupted) as caught:
        df.lit.resolve(resolver=batch, session=session_for(world), progress=False, concurrency=1)
    partial = caught.value.partial
    assert isinstance(partial, pd.DataFrame) and len(partial) == 4
    assert partial["pmid"].tolist()[:2] == ["30000001", "30000001"]  # the finished chunk
    errors = partial["resolve_error"].tolist()
    assert pd.isna(errors[0]) and all(is_abandoned(e) for e in errors[2:])
    assert partial["doi"].tolist() == dois  # the unfinished rows keep their own ids

    calls.clear()
    out = partial.lit.resolve(
        resolver=batch, session=session_for(world), progress=False, concurrency=1
    )
    assert calls == [["10.1000/c", "10.1000/d"]]  # only the interrupted chunk again
    assert out["pmid"].tolist() == ["30000001", "30000001", "30000001", "30000001"]


def test_an_interrupt_with_nothing_offered_is_a_plain_keyboard_interrupt() -> None:
    async def forever() -> None:
        await asyncio.sleep(0.05)
        _thread.interrupt_main()
        await asyncio.sleep(60)

    with pytest.raises(KeyboardInterrupt) as caught:
        run_sync(forever)
    assert not isinstance(caught.value, Interrupted)


def test_a_partial_that_cannot_be_built_does_not_hide_the_interrupt(
    caplog: pytest.LogCaptureFixture,
) -> None:
    def broken() -> Any:
        raise RuntimeError("cannot build")

    async def work() -> None:
        try:
            await asyncio.sleep(0.05)
            _thread.interrupt_main()
            await asyncio.sleep(60)
        except asyncio.CancelledError:
            offer_partial(broken)
            raise

    with pytest.raises(KeyboardInterrupt) as caught:
        run_sync(work)
    assert not isinstance(caught.value, Interrupted)
    assert "could not keep the partial result" in caplog.text


async def test_the_async_twin_is_cancelled_as_usual(world: FakeUpstream) -> None:
    # No synchronous caller waits for a partial: the cancellation propagates untouched.
    df = frame()
    hang = InterruptingFetcher(hang=frozenset({HANG}), fast=99)
    task = asyncio.create_task(
        df.lit.fetch_bodies_async(
            fetchers=[hang], resolve=False, session=session_for(world), progress=False
        )
    )
    while HANG not in hang.calls:
        await asyncio.sleep(0.01)
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task


def test_interrupted_is_public() -> None:
    assert "Interrupted" in litfetch_df.__all__
    assert issubclass(litfetch_df.Interrupted, KeyboardInterrupt)
