"""What a run did to the hosts: refusals, overflows, early retries and requests that could not pay.

Read from the fake after a client run (every counter covers the whole run,
since each run gets its own server): per host the requests, the 429s and
their share, the requests refused for being over the in-flight cap, and the
requests sent after a 429's ``Retry-After`` could have reached the client and
before that wait ran out; the requests to the per-article body routes
(Springer Nature OpenAccess JATS, Elsevier, Europe PMC ``fullTextXML``)
beside the number of articles those routes can serve
(:func:`benchmarks.model.servable`); and the rows the client's frame left
``abandoned``, by reason.
"""

from __future__ import annotations

import collections
from collections.abc import Mapping
from typing import Any

from tests.fake_upstream import FakeUpstream
from tests.fakes.world import HOST_EBI, HOST_ELSEVIER, HOST_SPRINGER, World

__all__ = ["RAW", "ROUTES", "measure", "route_counts"]

RAW = frozenset({"routes", "servable"})
"""Keys of :func:`measure` kept for tables and JSON, not for the printed block."""

ROUTES: dict[str, tuple[str, str]] = {
    "springer_jats": (HOST_SPRINGER, "/openaccess/jats"),
    "springer_meta": (HOST_SPRINGER, "/meta/"),
    "elsevier": (HOST_ELSEVIER, "/content/article/"),
    "epmc_fulltext": (HOST_EBI, "/fullTextXML"),
}
"""Route name -> (host, path fragment) of the per-article routes the report counts."""


def route_counts(fake: FakeUpstream) -> dict[str, int]:
    """Count the requests ``fake`` logged on each of :data:`ROUTES`."""
    counts: collections.Counter[str] = collections.Counter()
    for req in fake.requests():
        for name, (host, fragment) in ROUTES.items():
            if req.host == host and fragment in req.path:
                counts[name] += 1
    return {name: counts[name] for name in ROUTES}


def measure(
    world: World,
    fake: FakeUpstream,
    *,
    servable: Mapping[str, int],
    outcomes: Mapping[str, Any],
) -> dict[str, Any]:
    """Return the politeness figures of one run (see the module docstring)."""
    served = dict(world.served)
    share = {
        host: f"{n / served[host]:.1%}" for host, n in world.throttled.items() if served.get(host)
    }
    routes = route_counts(fake)
    asked = {
        name: f"{routes[name]} asked / {servable[name]} servable"
        for name in ("springer_jats", "elsevier", "epmc_fulltext")
    }
    asked["springer_meta"] = f"{routes['springer_meta']} asked"
    return {
        "429 share": share,
        "refused over in-flight cap": {h: n for h, n in world.over_in_flight.items() if n},
        "sent before Retry-After ran out": {h: n for h, n in world.early.items() if n},
        "per-article routes": asked,
        "routes": routes,
        "servable": dict(servable),
        "abandoned rows": dict(outcomes.get("abandoned", {})),
    }
