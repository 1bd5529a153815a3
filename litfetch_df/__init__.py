"""litfetch_df: identifiers, full text, file-sets and licences for tables of scholarly articles.

The litfetch-compatible engine (``ArticleIds``, ``Session``, the fetch ladder,
file sources, resolvers, access terms, relations, serde) plus a pandas face:
importing this package registers the ``.lit`` accessor on DataFrame and Series.
"""

from __future__ import annotations

from . import ids, serde
from ._http import BulkHttp, Http, Rate, RetryPolicy, UpstreamUnavailable
from ._version import __version__
from .files import ELSEVIER_XML, INSTITUTIONAL, JATS_XML, PDF, Blob, File, FileKind
from .ids import ArticleIds
from .metadata import Related, RelationType, SourceMetadata
from .session import NotInCache, Session

__all__ = [
    "ELSEVIER_XML",
    "INSTITUTIONAL",
    "JATS_XML",
    "PDF",
    "ArticleIds",
    "Blob",
    "BulkHttp",
    "File",
    "FileKind",
    "Http",
    "NotInCache",
    "Rate",
    "Related",
    "RelationType",
    "RetryPolicy",
    "Session",
    "SourceMetadata",
    "UpstreamUnavailable",
    "__version__",
    "ids",
    "serde",
]
