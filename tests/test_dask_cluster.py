"""``ddf.lit`` on a LocalCluster of two worker processes, against the fake upstream.

One cluster for the module (starting one costs seconds); the fake runs as a
real server on 127.0.0.1 that the workers reach through
:func:`tests.dask_support.session_factory`. Deselect with ``-m 'not cluster'``.
"""

from __future__ import annotations

import collections
import dataclasses
import tempfile
from collections.abc import Iterator
from typing import Any

import pandas as pd
import pytest

dd = pytest.importorskip("dask.dataframe")
distributed = pytest.importorskip("distributed")

import litfetch_df.dask  # noqa: E402  (registers ddf.lit)
from litfetch_df import HostLimit  # noqa: E402
from tests.dask_support import session_factory, unpace_unknown_hosts  # noqa: E402
from tests.fake_upstream import FakeUpstream  # noqa: E402
from tests.fakes.limits import HostLimit as FakeLimit  # noqa: E402
from tests.fakes.world import HOST_UNPAYWALL, World  # noqa: E402

pytestmark = [pytest.mark.cluster, pytest.mark.filterwarnings("ignore::DeprecationWarning")]

CONTACT = "dask-test@example.org"
UNPAYWALL_RATE = 8.0


@pytest.fixture(scope="module")
def client() -> Iterator[Any]:
    with (
        tempfile.TemporaryDirectory() as scratch,
        distributed.LocalCluster(
            n_workers=2,
            threads_per_worker=2,
            processes=True,
            dashboard_address=":0",  # a free port: never one another cluster holds
            local_directory=scratch,
        ) as cluster,
        distributed.Client(cluster) as client,
    ):
        client.run(unpace_unknown_hosts)
        yield client


def _install(fake: FakeUpstream, world: World) -> World:
    # A burst of two, as real token buckets allow: the fake forgives a request that the
    # trip from the coordinator's grant to the wire (a loaded machine's jitter, up to one
    # interval) brings in early; the pace itself is judged on the coordinator's clock.
    limit = FakeLimit(per_second=UNPAYWALL_RATE, burst=2)
    world.install(fake, limits={HOST_UNPAYWALL: limit})
    return world


@pytest.fixture
def world(fake: FakeUpstream) -> World:
    return _install(fake, World.from_corpus(24, seed=7))


@pytest.fixture
def unpaywall_world(fake: FakeUpstream) -> World:
    """The same world, but OpenAlex knows none of its DOIs: the licences step asks
    Unpaywall about every one (it asks only about DOIs OpenAlex's bulk filter does not
    know), so Unpaywall is the paced host each DOI makes one request of."""
    articles = World.from_corpus(24, seed=7).articles
    return _install(fake, World([dataclasses.replace(a, in_openalex=False) for a in articles]))


def _table(world: World) -> pd.DataFrame:
    # Every article twice, the copies in other partitions, one of them with its DOI shouted.
    ids = [(a.pmid, a.doi) for a in world.articles]
    rows = ids + [(p, d.upper() if d else d) for p, d in reversed(ids)]
    frame = pd.DataFrame(rows, columns=["pmid", "doi"], dtype=object)
    frame.index = pd.Index([f"row-{i:03d}" for i in range(len(frame))], name="label")
    return frame


def _sf(fake: FakeUpstream) -> Any:
    return session_factory(fake.port, {HOST_UNPAYWALL: HostLimit(rate=UNPAYWALL_RATE)})


@pytest.mark.parametrize("method", ["run", "fetch_bodies", "related", "files"])
def test_each_partition_equals_the_pandas_accessor(
    client: Any, fake: FakeUpstream, world: World, method: str
) -> None:
    ddf = dd.from_pandas(_table(world), npartitions=3, sort=False)
    lazy = getattr(ddf.lit, method)(session_factory=_sf(fake), contact=CONTACT)
    got = lazy.compute()
    assert list(got.dtypes) == list(lazy._meta.dtypes)  # meta tells the truth
    for i in range(ddf.npartitions):
        rows = ddf.partitions[i].compute()
        expected = getattr(rows.lit, method)(session=_sf(fake)(contact=CONTACT))
        mine = got[got.index.isin(rows.index)]
        pd.testing.assert_frame_equal(mine, expected)
    # The input's order (the long file-set leaves out rows without files).
    position = {label: i for i, label in enumerate(ddf.index.compute())}
    places = [position[label] for label in got.index]
    assert places == sorted(places)
    if method != "files":
        assert len(places) == len(position)


def _repeated(fake: FakeUpstream) -> dict[tuple[str, str, str, bytes], int]:
    seen = collections.Counter(
        (r.method, r.host, r.path + "?" + repr(sorted(r.query.items())), r.body)
        for r in fake.requests()
    )
    return {k: n for k, n in seen.items() if n > 1}


def test_duplicates_across_partitions_are_fetched_once(
    client: Any, fake: FakeUpstream, world: World
) -> None:
    table = _table(world)
    ddf = dd.from_pandas(table, npartitions=4, sort=False)
    got = ddf.lit.fetch_bodies(session_factory=_sf(fake), contact=CONTACT).compute()
    assert got["body_source"].notna().sum() > 0
    assert not _repeated(fake)  # no request went out twice, whichever worker sent it
    bodies = [r for r in fake.requests() if r.path.endswith(("fullTextXML", ".xml"))]
    assert bodies  # and the per-article requests were made


def _most_in_a_second(times: list[float]) -> int:
    times = sorted(times)
    most, start = 0, 0
    for end, at in enumerate(times):
        while at - times[start] >= 1.0:
            start += 1
        most = max(most, end - start + 1)
    return most


def test_the_cluster_keeps_one_budget_per_host(
    client: Any, fake: FakeUpstream, unpaywall_world: World
) -> None:
    dois = pd.DataFrame({"doi": [a.doi for a in unpaywall_world.articles if a.doi]})
    ddf = dd.from_pandas(dois, npartitions=4)
    coordinator = litfetch_df.dask.cluster_limiter(client)
    before = len(coordinator.granted().result().get(HOST_UNPAYWALL, []))
    got = ddf.lit.licences(session_factory=_sf(fake), contact=CONTACT).compute()
    arrivals = [r.at for r in fake.requests(HOST_UNPAYWALL)]  # the fake's own clock
    assert len(arrivals) == len(dois)  # every DOI asked once, nothing retried
    # Every request of every worker passed the one coordinator, paced on its clock (its
    # slots are one interval apart; a grant leaves when its loop wakes, a little late on a
    # loaded machine), and gave its place back.
    grants = coordinator.granted().result()[HOST_UNPAYWALL][before:]
    assert len(grants) == len(arrivals)
    assert _most_in_a_second(grants) <= UNPAYWALL_RATE + 1
    assert coordinator.held().result() == {}
    # The fake's verdict: never over its limit.
    assert unpaywall_world.throttled[HOST_UNPAYWALL] == 0
    # Allow the one request the fake's jitter tolerance forgives at a window's edge.
    assert _most_in_a_second(arrivals) <= UNPAYWALL_RATE + 1
    assert got["licence_error"].isna().all()


def test_without_the_coordinator_the_workers_overrun_the_host(
    client: Any, fake: FakeUpstream, unpaywall_world: World
) -> None:
    # The control for the test above, judged by construction rather than by speed: each
    # session may have one Unpaywall request out at a time, and the fake answers none
    # until two are out at once. Sessions pacing alone (each partition its own) get there;
    # a shared budget of one place never would.
    fake.hold_until_overlap(HOST_UNPAYWALL, in_flight=2, timeout=5.0)
    dois = pd.DataFrame({"doi": [a.doi for a in unpaywall_world.articles if a.doi]})
    ddf = dd.from_pandas(dois, npartitions=4)
    limit = HostLimit(rate=UNPAYWALL_RATE, in_flight=1)
    one_each = session_factory(fake.port, {HOST_UNPAYWALL: limit})
    ddf.lit.licences(session_factory=one_each, contact=CONTACT, coordinator=None).compute()
    assert fake.max_in_flight[HOST_UNPAYWALL] >= 2  # over the one place each session keeps


def test_a_coordinator_lost_with_its_worker_is_replaced(
    client: Any, fake: FakeUpstream, unpaywall_world: World
) -> None:
    # Last in the module: it restarts a worker of the shared cluster.
    first = litfetch_df.dask.cluster_limiter(client)
    future, _ = litfetch_df.dask.cluster._ACTORS[client]
    (holder,) = client.who_has([future])[future.key]
    client.restart_workers([holder])  # the worker holding the coordinator dies
    client.run(unpace_unknown_hosts)  # the new worker process starts afresh
    second = litfetch_df.dask.cluster_limiter(client)
    assert second is not first
    dois = pd.DataFrame({"doi": [a.doi for a in unpaywall_world.articles if a.doi]})
    got = (
        dd.from_pandas(dois, npartitions=2)
        .lit.licences(session_factory=_sf(fake), contact=CONTACT)
        .compute()
    )
    assert got["licence_error"].isna().all()  # the next run is paced by the new one
    assert second.held().result() == {}  # and gave back every place it granted
    assert len(second.granted().result()[HOST_UNPAYWALL]) == len(dois)
