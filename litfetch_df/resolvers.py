"""The bundled resolvers, per item and batch, and the ways to compose them.

Per item, a :data:`Resolver` is any ``async (ArticleIds, Http) -> ArticleIds``
that fills gaps with :meth:`~litfetch_df.ids.ArticleIds.merge`; compose them with
:func:`chain` (or take :func:`default_resolver`). For a corpus, a
:data:`BatchResolver` enriches a whole sequence in ``ceil(distinct / cap)``
requests per service and reports the indices it had to abandon; compose them
with :func:`chain_batch` (or take :func:`default_batch_resolver`).

Every resolver takes the :class:`~litfetch_df.Http` (a Session) at call time::

    async with litfetch_df.Session(contact="you@example.org") as s:
        ids = await EuropePmcResolver()(ArticleIds(pmid="30000001"), s)
        enriched, abandoned = await default_batch_resolver()(batch, s)
"""

from __future__ import annotations

from .operations.resolution import (
    EuropePmcBatchResolver,
    NcbiIdConverterBatchResolver,
    OpenAlexResolver,
    chain,
    chain_batch,
    default_batch_resolver,
    default_resolver,
)
from .operations.types import BatchResolver, Resolver
from .sources.europe_pmc_search import EuropePmcResolver
from .sources.ncbi_idconv import NcbiIdConverterResolver
from .sources.semantic_scholar import SemanticScholarResolver
from .sources.semantic_scholar_batch import SemanticScholarBatchResolver

__all__ = [
    "BatchResolver",
    "EuropePmcBatchResolver",
    "EuropePmcResolver",
    "NcbiIdConverterBatchResolver",
    "NcbiIdConverterResolver",
    "OpenAlexResolver",
    "Resolver",
    "SemanticScholarBatchResolver",
    "SemanticScholarResolver",
    "chain",
    "chain_batch",
    "default_batch_resolver",
    "default_resolver",
]
