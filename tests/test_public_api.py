"""The litfetch surface is importable from litfetch_df with the same names and shapes."""

from __future__ import annotations

import dataclasses
import inspect

import pytest

import litfetch_df
from litfetch_df import ids, resolvers, serde

TOP_LEVEL = [
    "ArticleIds", "Session", "fetch_body", "list_files", "fetch_file", "resolve_access",
    "related_ids", "Fetcher", "FileSource", "Resolver", "BatchResolver", "default_fetchers",
    "default_file_sources", "default_resolver", "default_batch_resolver", "chain",
    "chain_batch", "extract_source_metadata", "EuropePmcBookshelfFetcher", "PmcOaFetcher",
    "EuropePmcFetcher", "ElsevierFetcher", "SpringerFetcher", "BiorxivFetcher",
    "UnpaywallFileSource", "SemanticScholarFileSource", "CrossrefFileSource",
    "SpringerFileSource", "Blob", "File", "FileKind", "SourceMetadata", "Related",
    "RelationType", "INSTITUTIONAL", "Http", "Rate", "RetryPolicy",
]  # fmt: skip

RESOLVERS = [
    "EuropePmcResolver", "NcbiIdConverterResolver", "SemanticScholarResolver",
    "NcbiIdConverterBatchResolver", "EuropePmcBatchResolver", "OpenAlexResolver",
]  # fmt: skip


@pytest.mark.parametrize("name", TOP_LEVEL)
def test_top_level_name_is_exported_and_documented(name: str) -> None:
    assert name in litfetch_df.__all__
    obj = getattr(litfetch_df, name)
    if isinstance(obj, type) or inspect.isfunction(obj):
        assert inspect.getdoc(obj), f"{name} has no docstring"


@pytest.mark.parametrize("name", RESOLVERS)
def test_bundled_resolvers_live_in_the_resolvers_module(name: str) -> None:
    assert getattr(resolvers, name) is not None


def test_values_are_frozen_dataclasses_with_the_documented_fields() -> None:
    for cls, fields in [
        (litfetch_df.ArticleIds, ["pmid", "pmcid", "doi", "bookid"]),
        # issue 15: access_basis (which basis gave access), also_listed_by (every source);
        # issue 16: oa_status (a service's status, normalised)
        (litfetch_df.SourceMetadata, ["licence", "access", "basis", "access_basis", "oa_status"]),
        (litfetch_df.Blob, ["file", "content"]),
        (
            litfetch_df.File,
            ["kind", "source", "media_type", "uri", "filename", "credential_key",
             "size_bytes", "description", "also_listed_by"],
        ),
    ]:  # fmt: skip
        assert dataclasses.is_dataclass(cls)
        assert cls.__dataclass_params__.frozen  # type: ignore[attr-defined]
        assert [f.name for f in dataclasses.fields(cls)] == fields


def test_constants_and_enums_have_the_documented_values() -> None:
    assert litfetch_df.INSTITUTIONAL == "litfetch:institutional"
    assert {"pmid", "pmcid", "doi"} == ids.RESOLVABLE
    assert litfetch_df.FileKind.BODY.value == "body"
    assert litfetch_df.FileKind.SUPPLEMENTARY.value == "supplementary"
    assert litfetch_df.RelationType.PREPRINT.value == "preprint"
    assert litfetch_df.RelationType.PUBLISHED.value == "published"
    policy = litfetch_df.RetryPolicy()
    assert (policy.max_attempts, policy.base_delay, policy.max_delay) == (3, 0.5, 8.0)
    for member in ("DEFAULT", "NCBI_UNKEYED", "NCBI_KEYED", "S2_UNKEYED", "S2_KEYED"):
        assert isinstance(litfetch_df.Rate[member].min_interval, float)


def test_default_ladder_and_sources_are_in_the_documented_order() -> None:
    assert [f.name for f in litfetch_df.default_fetchers()] == [
        "europe_pmc_bookshelf", "pmc_oa_s3", "europe_pmc", "elsevier_oa", "springer_oa",
    ]  # fmt: skip
    assert [s.name for s in litfetch_df.default_file_sources()] == [
        "pmc_oa_s3", "unpaywall", "semantic_scholar", "crossref_tdm", "springer",
    ]  # fmt: skip
    assert litfetch_df.BiorxivFetcher().name == "biorxiv"


def test_serde_pairs_exist() -> None:
    for stem in ("article_ids", "file", "source_metadata"):
        assert callable(getattr(serde, f"{stem}_to_dict"))
        assert callable(getattr(serde, f"{stem}_from_dict"))


def test_session_signature_matches_the_reference() -> None:
    params = inspect.signature(litfetch_df.Session).parameters
    for name in ("client_factory", "retry", "timeout", "contact"):
        assert name in params
        assert params[name].kind is inspect.Parameter.KEYWORD_ONLY
    assert params["timeout"].default == 30.0
    for method in ("fetch_body", "list_files", "fetch_file", "resolve_access", "related_ids"):
        assert inspect.iscoroutinefunction(getattr(litfetch_df.Session, method))
        assert inspect.iscoroutinefunction(getattr(litfetch_df, method))


# Every import path the README, the docs and the contract name (issue 28: moving the
# package's folders must not break one).
DOCUMENTED_PATHS = [
    "litfetch_df",
    "litfetch_df.ids",
    "litfetch_df.files",
    "litfetch_df.metadata",
    "litfetch_df.publishers",
    "litfetch_df.limits",
    "litfetch_df.serde",
    "litfetch_df.resolvers",
    "litfetch_df.session",
    "litfetch_df.text",
    "litfetch_df.demo",
    "litfetch_df.frame",
    "litfetch_df.operations.licence",
    "litfetch_df.operations.licence_evidence",
    "litfetch_df.operations.service_terms",
    "litfetch_df.cli",
]


@pytest.mark.parametrize("path", DOCUMENTED_PATHS)
def test_a_documented_import_path_imports(path: str) -> None:
    import importlib

    assert importlib.import_module(path) is not None


def test_the_documented_names_are_where_the_docs_say() -> None:
    from litfetch_df.cli import main
    from litfetch_df.demo import run_demo
    from litfetch_df.session import NotInCache, Session
    from litfetch_df.text import Document, read_text

    assert main is not None and run_demo is not None
    assert Session is litfetch_df.Session and NotInCache is litfetch_df.NotInCache
    assert read_text is litfetch_df.read_text and Document is litfetch_df.Document
    assert callable(litfetch_df.read_parquet) and callable(litfetch_df.read_pubmed)
    import pandas as pd

    # importing the package registers the accessors (litfetch_df.frame)
    assert hasattr(pd.DataFrame({"pmid": ["1"]}), "lit")
    assert hasattr(pd.Series(["1"]), "lit")


def test_the_cli_entry_point_is_the_documented_one() -> None:
    import tomllib
    from pathlib import Path

    project = tomllib.loads((Path(__file__).parents[1] / "pyproject.toml").read_text())
    assert project["project"]["scripts"]["litfetch-df"] == "litfetch_df.cli:main"
