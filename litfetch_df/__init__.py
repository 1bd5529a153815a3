"""litfetch_df: identifiers, full text, file-sets and licences for tables of scholarly articles.

The litfetch-compatible engine (``ArticleIds``, ``Session``, the fetch ladder,
file sources, resolvers, access terms, relations, serde) plus a pandas face:
importing this package registers the ``.lit`` accessor on DataFrame and Series.
"""

from __future__ import annotations

from . import frame, ids, resolvers, serde, text
from ._version import __version__
from .files import ELSEVIER_XML, INSTITUTIONAL, JATS_XML, PDF, Blob, File, FileKind, Saved
from .frame import (
    Interrupted,
    Options,
    get_options,
    option_context,
    reset_options,
    set_options,
)
from .frame.io.parquet import read_parquet
from .frame.io.readers import read_pubmed, read_table
from .ids import ArticleIds
from .metadata import Related, RelationType, SourceMetadata
from .operations.fileset import default_file_sources
from .operations.ladder import default_fetchers
from .operations.licence import extract_source_metadata
from .operations.oneshot import fetch_body, fetch_file, list_files, related_ids, resolve_access
from .operations.resolution import (
    EuropePmcBatchResolver,
    NcbiIdConverterBatchResolver,
    OpenAlexResolver,
    chain,
    chain_batch,
    default_batch_resolver,
    default_resolver,
)
from .operations.types import BatchResolver, Fetcher, FileSource, Resolver
from .session import NotInCache, Session
from .sources.biorxiv import BiorxivFetcher
from .sources.bulk import BulkResult
from .sources.crossref import CrossrefFileSource
from .sources.elsevier import ElsevierFetcher
from .sources.europe_pmc import EuropePmcBookshelfFetcher, EuropePmcFetcher
from .sources.europe_pmc_search import EuropePmcResolver
from .sources.ncbi_idconv import NcbiIdConverterResolver
from .sources.openalex import OpenAlexFileSource
from .sources.pmc_oa import PmcOaFetcher
from .sources.semantic_scholar import SemanticScholarFileSource, SemanticScholarResolver
from .sources.springer import SpringerFetcher, SpringerFileSource
from .sources.unpaywall import UnpaywallFileSource
from .store.cache import CacheInfo, ResponseCache
from .text import Document, TextLoss, read_text
from .wire.clock import Clock, SystemClock
from .wire.http import BulkHttp, Http, Rate, RetryPolicy, UpstreamUnavailable
from .wire.limiter import HostLimit, HostParked, LimiterState

__all__ = [
    "ELSEVIER_XML",
    "INSTITUTIONAL",
    "JATS_XML",
    "PDF",
    "ArticleIds",
    "BatchResolver",
    "BiorxivFetcher",
    "Blob",
    "BulkHttp",
    "BulkResult",
    "CacheInfo",
    "Clock",
    "CrossrefFileSource",
    "Document",
    "ElsevierFetcher",
    "EuropePmcBatchResolver",
    "EuropePmcBookshelfFetcher",
    "EuropePmcFetcher",
    "EuropePmcResolver",
    "Fetcher",
    "File",
    "FileKind",
    "FileSource",
    "HostLimit",
    "HostParked",
    "Http",
    "Interrupted",
    "LimiterState",
    "NcbiIdConverterBatchResolver",
    "NcbiIdConverterResolver",
    "NotInCache",
    "OpenAlexFileSource",
    "OpenAlexResolver",
    "Options",
    "PmcOaFetcher",
    "Rate",
    "Related",
    "RelationType",
    "Resolver",
    "ResponseCache",
    "RetryPolicy",
    "Saved",
    "SemanticScholarFileSource",
    "SemanticScholarResolver",
    "Session",
    "SourceMetadata",
    "SpringerFetcher",
    "SpringerFileSource",
    "SystemClock",
    "TextLoss",
    "UnpaywallFileSource",
    "UpstreamUnavailable",
    "__version__",
    "chain",
    "chain_batch",
    "default_batch_resolver",
    "default_fetchers",
    "default_file_sources",
    "default_resolver",
    "extract_source_metadata",
    "fetch_body",
    "fetch_file",
    "frame",
    "get_options",
    "ids",
    "list_files",
    "option_context",
    "read_parquet",
    "read_pubmed",
    "read_table",
    "read_text",
    "related_ids",
    "reset_options",
    "resolve_access",
    "resolvers",
    "serde",
    "set_options",
    "text",
]
