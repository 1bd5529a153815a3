"""The value types: File / FileKind / Blob, SourceMetadata, Related / RelationType."""

from __future__ import annotations

import dataclasses

import pytest

import litfetch_df
from litfetch_df.files import ELSEVIER_XML, INSTITUTIONAL, JATS_XML, PDF, Blob, File, FileKind
from litfetch_df.ids import ArticleIds
from litfetch_df.metadata import Related, RelationType, SourceMetadata


def test_media_type_constants() -> None:
    assert JATS_XML == "application/jats+xml"
    assert ELSEVIER_XML == "application/vnd.elsevier+xml"
    assert PDF == "application/pdf"
    # the prefix keeps the marker from colliding with a user's credentials key
    assert INSTITUTIONAL == "litfetch:institutional"


def test_values_are_exported_at_top_level() -> None:
    for name in (
        "ArticleIds",
        "File",
        "FileKind",
        "Blob",
        "SourceMetadata",
        "Related",
        "RelationType",
        "INSTITUTIONAL",
        "JATS_XML",
        "ELSEVIER_XML",
        "PDF",
    ):
        assert getattr(litfetch_df, name) is not None, name
    assert litfetch_df.File is File
    assert litfetch_df.ids.ArticleIds is ArticleIds


def test_file_defaults_and_frozen() -> None:
    f = File(kind=FileKind.BODY, source="pmc_oa")
    assert (f.media_type, f.uri, f.filename, f.credential_key, f.size_bytes, f.description) == (
        None,
        None,
        None,
        None,
        None,
        None,
    )
    with pytest.raises(dataclasses.FrozenInstanceError):
        f.uri = "https://example.org"  # type: ignore[misc]
    assert hash(f) == hash(File(kind=FileKind.BODY, source="pmc_oa"))


def test_file_kind_values() -> None:
    assert {k.value for k in FileKind} == {"body", "supplementary"}
    assert FileKind("body") is FileKind.BODY


def test_blob_repr_hides_the_bytes() -> None:
    content = b"<article>secret-bytes</article>"
    blob = Blob(File(kind=FileKind.BODY, source="europepmc", media_type=JATS_XML), content)
    text = repr(blob)
    assert "secret-bytes" not in text
    assert f"{len(content)} bytes" in text
    assert "europepmc" in text
    assert blob == Blob(File(kind=FileKind.BODY, source="europepmc", media_type=JATS_XML), content)


def test_source_metadata_is_empty() -> None:
    assert SourceMetadata().is_empty()
    assert SourceMetadata(basis="unpaywall").is_empty()
    assert not SourceMetadata(licence="cc-by").is_empty()
    assert not SourceMetadata(access="gold").is_empty()
    with pytest.raises(dataclasses.FrozenInstanceError):
        SourceMetadata().licence = "x"  # type: ignore[misc]


def test_related_is_a_tagged_article_ids() -> None:
    r = Related(RelationType.PREPRINT, ArticleIds(doi="10.1101/2024.04.01.587366"))
    relation, ids = r
    assert relation is RelationType.PREPRINT
    assert ids.doi == "10.1101/2024.04.01.587366"
    assert {t.value for t in RelationType} == {"preprint", "published"}
