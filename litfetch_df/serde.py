"""JSON-able dict forms of the value types, for consumers that persist them.

Each type has a ``*_to_dict`` / ``*_from_dict`` pair; a round trip is exact.
A ``*_from_dict`` given a malformed dict raises :class:`ValueError`.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from .files import File, FileKind
from .ids import FIELDS, ArticleIds
from .metadata import Related, RelationType, SourceMetadata

__all__ = [
    "article_ids_from_dict",
    "article_ids_to_dict",
    "file_from_dict",
    "file_to_dict",
    "related_from_dict",
    "related_to_dict",
    "source_metadata_from_dict",
    "source_metadata_to_dict",
]


def _mapping(data: object, what: str) -> Mapping[str, Any]:
    if not isinstance(data, Mapping):
        raise ValueError(f"{what} must be a mapping, got {type(data).__name__}")
    return data


def _required(data: Mapping[str, Any], key: str) -> Any:
    # Stored records are external input: a missing key is a ValueError, not a KeyError.
    if key not in data:
        raise ValueError(f"missing key {key!r}")
    return data[key]


def _opt_str(data: Mapping[str, Any], key: str) -> str | None:
    value = data.get(key)
    if value is None:
        return None
    if not isinstance(value, str):
        raise ValueError(f"{key} must be a string or null, got {type(value).__name__}")
    return value


def article_ids_to_dict(ids: ArticleIds) -> dict[str, str | None]:
    """Return ``ids`` as a dict with the four id fields (absent ones as ``None``)."""
    return {name: getattr(ids, name) for name in FIELDS}


def article_ids_from_dict(data: Mapping[str, Any]) -> ArticleIds:
    """Rebuild an :class:`ArticleIds` from :func:`article_ids_to_dict` output."""
    data = _mapping(data, "ids")
    return ArticleIds(**{name: _opt_str(data, name) for name in FIELDS})


def file_to_dict(file: File) -> dict[str, Any]:
    """Return ``file`` as a JSON-able dict (``kind`` as its string value).

    ``also_listed_by`` appears (as a list) only when other sources listed the
    file, so a file one source listed keeps its earlier shape.
    """
    data: dict[str, Any] = {
        "kind": file.kind.value,
        "source": file.source,
        "media_type": file.media_type,
        "uri": file.uri,
        "filename": file.filename,
        "credential_key": file.credential_key,
        "size_bytes": file.size_bytes,
        "description": file.description,
    }
    if file.also_listed_by:
        data["also_listed_by"] = list(file.also_listed_by)
    return data


def file_from_dict(data: Mapping[str, Any]) -> File:
    """Rebuild a :class:`File` from :func:`file_to_dict` output."""
    data = _mapping(data, "file")
    size = data.get("size_bytes")
    if size is not None and (not isinstance(size, int) or isinstance(size, bool)):
        raise ValueError(f"size_bytes must be an integer or null, got {size!r}")
    source = data.get("source")
    if not isinstance(source, str):
        raise ValueError("source must be a string")
    return File(
        kind=FileKind(_required(data, "kind")),
        source=source,
        media_type=_opt_str(data, "media_type"),
        uri=_opt_str(data, "uri"),
        filename=_opt_str(data, "filename"),
        credential_key=_opt_str(data, "credential_key"),
        size_bytes=size,
        description=_opt_str(data, "description"),
        also_listed_by=_also_listed_by(data),
    )


def _also_listed_by(data: Mapping[str, Any]) -> tuple[str, ...]:
    names = data.get("also_listed_by")
    if names is None:
        return ()
    if not isinstance(names, list | tuple) or not all(isinstance(n, str) for n in names):
        raise ValueError("also_listed_by must be a list of strings")
    return tuple(names)


def source_metadata_to_dict(meta: SourceMetadata) -> dict[str, str | None]:
    """Return ``meta`` as a dict of its raw fields."""
    return {
        "licence": meta.licence,
        "access": meta.access,
        "basis": meta.basis,
        "access_basis": meta.access_basis,
        "oa_status": meta.oa_status,
    }


def source_metadata_from_dict(data: Mapping[str, Any]) -> SourceMetadata:
    """Rebuild a :class:`SourceMetadata` from :func:`source_metadata_to_dict` output."""
    data = _mapping(data, "source metadata")
    return SourceMetadata(
        licence=_opt_str(data, "licence"),
        access=_opt_str(data, "access"),
        basis=_opt_str(data, "basis"),
        access_basis=_opt_str(data, "access_basis"),
        oa_status=_opt_str(data, "oa_status"),
    )


def related_to_dict(related: Related) -> dict[str, Any]:
    """Return ``related`` as ``{"relation": ..., "ids": {...}}``."""
    return {"relation": related.relation.value, "ids": article_ids_to_dict(related.ids)}


def related_from_dict(data: Mapping[str, Any]) -> Related:
    """Rebuild a :class:`Related` from :func:`related_to_dict` output."""
    data = _mapping(data, "related")
    relation = RelationType(_required(data, "relation"))
    return Related(relation, article_ids_from_dict(_required(data, "ids")))
