"""serde: every ``*_to_dict`` / ``*_from_dict`` pair round-trips exactly, also through JSON."""

from __future__ import annotations

import json
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from litfetch_df import serde
from litfetch_df.files import File, FileKind
from litfetch_df.ids import ArticleIds
from litfetch_df.metadata import Related, RelationType, SourceMetadata

_opt_text = st.one_of(st.none(), st.text(max_size=40))
_ids = st.builds(ArticleIds, pmid=_opt_text, pmcid=_opt_text, doi=_opt_text, bookid=_opt_text)
_files = st.builds(
    File,
    kind=st.sampled_from(FileKind),
    source=st.text(max_size=20),
    media_type=_opt_text,
    uri=_opt_text,
    filename=_opt_text,
    credential_key=_opt_text,
    size_bytes=st.one_of(st.none(), st.integers(min_value=0, max_value=2**53)),
    description=_opt_text,
)
_meta = st.builds(SourceMetadata, licence=_opt_text, access=_opt_text, basis=_opt_text)
_related = st.builds(Related, st.sampled_from(RelationType), _ids)


def _via_json(d: dict[str, Any]) -> Any:
    return json.loads(json.dumps(d))


@settings(max_examples=150, deadline=None)
@given(ids=_ids)
def test_article_ids_round_trip(ids: ArticleIds) -> None:
    d = serde.article_ids_to_dict(ids)
    assert set(d) == {"pmid", "pmcid", "doi", "bookid"}
    assert serde.article_ids_from_dict(d) == ids
    assert serde.article_ids_from_dict(_via_json(d)) == ids


@settings(max_examples=150, deadline=None)
@given(file=_files)
def test_file_round_trip(file: File) -> None:
    d = serde.file_to_dict(file)
    assert d["kind"] in {"body", "supplementary"}
    assert serde.file_from_dict(d) == file
    assert serde.file_from_dict(_via_json(d)) == file


@settings(max_examples=100, deadline=None)
@given(meta=_meta)
def test_source_metadata_round_trip(meta: SourceMetadata) -> None:
    d = serde.source_metadata_to_dict(meta)
    assert serde.source_metadata_from_dict(d) == meta
    assert serde.source_metadata_from_dict(_via_json(d)) == meta


@settings(max_examples=100, deadline=None)
@given(related=_related)
def test_related_round_trip(related: Related) -> None:
    d = serde.related_to_dict(related)
    back = serde.related_from_dict(d)
    assert back == related
    assert back.relation is related.relation
    assert serde.related_from_dict(_via_json(d)) == related


def test_dict_shapes_are_plain_json() -> None:
    f = File(kind=FileKind.SUPPLEMENTARY, source="pmc_oa", size_bytes=12, filename="s1.pdf")
    assert serde.file_to_dict(f) == {
        "kind": "supplementary",
        "source": "pmc_oa",
        "media_type": None,
        "uri": None,
        "filename": "s1.pdf",
        "credential_key": None,
        "size_bytes": 12,
        "description": None,
    }
    r = Related(RelationType.PUBLISHED, ArticleIds(doi="10.1000/x"))
    assert serde.related_to_dict(r) == {
        "relation": "published",
        "ids": {"pmid": None, "pmcid": None, "doi": "10.1000/x", "bookid": None},
    }


def test_missing_optional_keys_read_as_none() -> None:
    assert serde.article_ids_from_dict({"doi": "10.1000/x"}) == ArticleIds(doi="10.1000/x")
    assert serde.source_metadata_from_dict({}) == SourceMetadata()
    assert serde.file_from_dict({"kind": "body", "source": "s"}) == File(FileKind.BODY, "s")


@pytest.mark.parametrize(
    ("func", "data"),
    [
        (serde.article_ids_from_dict, {"pmid": 123}),
        (serde.file_from_dict, {"kind": "body", "source": "s", "size_bytes": "12"}),
        (serde.file_from_dict, {"kind": "body", "source": "s", "size_bytes": True}),
        (serde.file_from_dict, {"kind": "body", "source": None}),
        (serde.file_from_dict, {"kind": "nope", "source": "s"}),
        (serde.file_from_dict, {"source": "s"}),
        (serde.source_metadata_from_dict, {"licence": 1}),
        (serde.related_from_dict, {"relation": "cousin", "ids": {}}),
        (serde.related_from_dict, {"relation": "preprint"}),
        (serde.related_from_dict, {"relation": "preprint", "ids": "10.1000/x"}),
    ],
)
def test_malformed_dicts_raise_value_error(func: Any, data: dict[str, Any]) -> None:
    with pytest.raises(ValueError):
        func(data)


def test_source_metadata_round_trip_keeps_the_access_basis() -> None:
    meta = SourceMetadata("CC BY", "gold", basis="artifact", access_basis="unpaywall")
    d = serde.source_metadata_to_dict(meta)
    assert d["access_basis"] == "unpaywall"
    assert serde.source_metadata_from_dict(_via_json(d)) == meta


def test_file_round_trip_keeps_every_source_that_listed_it() -> None:
    f = File(FileKind.BODY, "pmc_oa_s3", uri="https://x.example/a.pdf", also_listed_by=("a", "b"))
    d = serde.file_to_dict(f)
    assert d["also_listed_by"] == ["a", "b"]
    assert serde.file_from_dict(_via_json(d)) == f
    with pytest.raises(ValueError, match="also_listed_by"):
        serde.file_from_dict({**d, "also_listed_by": "a"})
