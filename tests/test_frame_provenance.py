"""A frame remembers the session settings it was made with, and later steps use them.

After ``df.lit.resolve(session=demo_session())`` a plain ``out.lit.run(...)``
(or one on a slice of ``out``) is answered by the same demo world instead of
going to the network; a call that names its own session or cache wins; a
call that goes online for a frame made offline says so in one warning; a
frame whose offline cache is gone fails with a clear message. Keys never
appear in ``attrs``.
"""

from __future__ import annotations

import warnings
from pathlib import Path

import httpx
import pandas as pd
import pytest

import litfetch_df as lf
from litfetch_df import demo
from litfetch_df.frame.engine.context import inherit as _inherit
from litfetch_df.frame.io.provenance import ATTRS_KEY, Provenance, from_attrs
from tests.conftest import mock_session

STEPS = ("bodies", "files", "licences", "related")


@pytest.fixture(scope="module")
def resolved() -> pd.DataFrame:
    return demo.load_demo_export().lit.resolve(session=demo.demo_session(), progress=False)


def test_a_step_records_its_session_settings_and_never_a_key(resolved: pd.DataFrame) -> None:
    found = from_attrs(resolved.attrs)
    assert found is not None
    assert found.contact == demo.DEMO_CONTACT and found.demo and found.keyless
    assert found.cache is None and not found.offline  # the demo world needs neither
    assert set(resolved.attrs[ATTRS_KEY]) == {
        "contact",
        "cache",
        "cache_ttl",
        "offline",
        "keyless",
        "demo",
    }
    with lf.option_context(credentials={"ncbi_api_key": "SEKRIT-NCBI"}):
        again = resolved.lit.resolve(force=True, progress=False)
    assert "SEKRIT" not in repr(again.attrs)


def test_a_later_step_replays_the_frame_s_cache(resolved: pd.DataFrame) -> None:
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # no "going online" warning, no contact warning
        inherited = resolved.lit.run(STEPS, progress=False)
    given = resolved.lit.run(STEPS, session=demo.demo_session(), progress=False)
    pd.testing.assert_frame_equal(inherited.drop(columns="body"), given.drop(columns="body"))
    assert inherited["body"].tolist() == given["body"].tolist()
    assert inherited["body_source"].notna().sum() >= 4  # answered by the demo world
    # A slice keeps the settings too (pandas carries attrs along).
    head = resolved.head(3).lit.fetch_bodies(progress=False)
    assert head["body_source"].tolist() == given["body_source"].head(3).tolist()


def test_a_call_going_online_for_an_offline_frame_says_so_once(resolved: pd.DataFrame) -> None:
    def handler(request: httpx.Request) -> httpx.Response:
        return httpx.Response(404)

    with pytest.warns(UserWarning) as caught:
        resolved.head(2).lit.fetch_bodies(session=mock_session(handler), progress=False)
    online = [w for w in caught if "made offline" in str(w.message)]
    assert len(online) == 1
    assert len(str(online[0].message).splitlines()) == 1


def test_an_offline_frame_whose_cache_is_gone_fails_clearly(tmp_path: Path) -> None:
    frame = pd.DataFrame({"pmid": ["1"]})
    gone = str(tmp_path / "gone" / "responses.sqlite3")
    frame.attrs[ATTRS_KEY] = Provenance(cache=gone, offline=True).as_attrs()
    with pytest.raises(ValueError, match="no longer exists"):
        frame.lit.resolve(progress=False)
    assert not (tmp_path / "gone").exists()


def test_the_call_s_own_cache_wins(tmp_path: Path, resolved: pd.DataFrame) -> None:
    cache = tmp_path / "mine"
    demo.copy_demo_cache(cache)
    out = resolved.head(1).lit.fetch_bodies(
        cache=cache, offline=True, contact=demo.DEMO_CONTACT, progress=False
    )
    found = from_attrs(out.attrs)
    assert found is not None and found.cache == str(cache / "responses.sqlite3")
    assert not found.keyless


def test_a_contact_alone_travels_too() -> None:
    frame = pd.DataFrame({"doi": ["10.1/a"]})
    frame.attrs[ATTRS_KEY] = Provenance(contact="me@lab.example").as_attrs()
    with lf.option_context(contact=None):
        config, found = _inherit({}, frame)
        assert config == {"contact": "me@lab.example"} and found is not None
        assert _inherit({"contact": "other@lab.example"}, frame)[0] == {
            "contact": "other@lab.example"
        }
    with lf.option_context(contact="default@lab.example"):
        assert _inherit({}, frame)[0] == {}  # the package default stands
