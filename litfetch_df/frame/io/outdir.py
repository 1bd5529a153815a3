"""Writing fetched bytes under an output directory: safe names, no collisions, atomic.

Names come from the article's ids (``PMC7000001.xml``,
``doi-10.1000_abc.1-3f2a9c1e.xml``) and, for file-set members, from the
upstream filename. Anything from upstream or from the user's table is
untrusted: it is reduced to a plain file name, and every final path is
resolved and checked to lie inside the output directory. Files are written to
a temporary name in the same directory and moved into place with
:func:`os.replace`, so a reader (or an interrupted run) never sees half a file.
"""

from __future__ import annotations

import contextlib
import hashlib
import mimetypes
import os
import re
import unicodedata
import urllib.parse
import urllib.request
from collections.abc import Collection, Iterable, Iterator
from pathlib import Path
from typing import Final

from ...files import ELSEVIER_XML, JATS_XML, PDF, File
from ...ids import ArticleIds, doi_key
from ...store.atomic import PART_SUFFIX, abandoned, open_part, write_atomic

__all__ = [
    "PART_SUFFIX",
    "LocalStaged",
    "Names",
    "OutDir",
    "extension_for",
    "id_stem",
    "local_root",
    "open_part",
    "remove_leftovers",
    "safe_filename",
    "safe_join",
    "write_atomic",
]

_MAX_NAME: Final = 120  # well under every common filesystem's 255-byte limit
_UNSAFE = re.compile(r"[^A-Za-z0-9._+-]+")
# Windows reserves these device names whatever follows the first dot ("CON.tar.gz" is the
# console), and COM0/LPT0 too; superscript digits (COM¹) reach here already folded to ASCII.
_WINDOWS_RESERVED = frozenset(
    {"con", "prn", "aux", "nul"} | {f"com{i}" for i in range(10)} | {f"lpt{i}" for i in range(10)}
)
_EXTENSIONS: Final = {
    JATS_XML: ".xml",
    ELSEVIER_XML: ".xml",
    PDF: ".pdf",
    "application/xml": ".xml",
    "text/xml": ".xml",
    "application/json": ".json",
    "text/html": ".html",
    "text/plain": ".txt",
    "image/jpeg": ".jpg",
    "image/png": ".png",
    "image/gif": ".gif",
    "image/tiff": ".tif",
    "application/zip": ".zip",
    "application/gzip": ".gz",
    "application/x-tar": ".tar",
}


def _short_hash(text: str, n: int = 8) -> str:
    return hashlib.sha256(text.encode("utf-8", "surrogatepass")).hexdigest()[:n]


def _clean(text: str) -> str:
    """Reduce ``text`` to ``[A-Za-z0-9._+-]``, with no leading dots or dashes."""
    folded = unicodedata.normalize("NFKD", text).encode("ascii", "ignore").decode("ascii")
    cleaned = _UNSAFE.sub("_", folded).strip("._- ")
    return re.sub(r"_+", "_", cleaned)


def extension_for(media_type: str | None, filename: str | None = None) -> str:
    """Return the file extension (with its dot) for a media type, e.g. ``.xml`` for JATS.

    Falls back to the filename's own extension, then ``.bin``.
    """
    if media_type:
        base = media_type.split(";")[0].strip().lower()
        if base in _EXTENSIONS:
            return _EXTENSIONS[base]
        if base.endswith("+xml"):
            return ".xml"
        guessed = mimetypes.guess_extension(base, strict=False)
        if guessed:
            return guessed
    if filename:
        suffix = _clean(Path(filename.replace("\\", "/")).suffix.lstrip("."))
        if suffix and len(suffix) <= 10:
            return "." + suffix.lower()
    return ".bin"


def id_stem(ids: ArticleIds) -> str:
    """Return a file-name stem naming the article: PMCID, then Bookshelf id, PMID, DOI.

    A DOI stem carries a short hash of the case-folded DOI, because cleaning
    it into a file name loses characters and two DOIs could otherwise meet.
    """
    if ids.pmcid:
        cleaned = _clean(ids.pmcid)
        if cleaned == ids.pmcid:
            return cleaned
    if ids.bookid:
        cleaned = _clean(ids.bookid)
        if cleaned == ids.bookid:
            return cleaned
    if ids.pmid and ids.pmid.isascii() and ids.pmid.isdigit():
        return f"pmid-{ids.pmid}"
    if ids.doi:
        key = doi_key(ids.doi)
        return f"doi-{_clean(key.replace('/', '_'))[:80]}-{_short_hash(key)}"
    raw = repr((ids.pmid, ids.pmcid, ids.doi, ids.bookid))
    return f"article-{_short_hash(raw)}"


def safe_filename(name: str | None, *, fallback: str = "file") -> str:
    """Return ``name`` reduced to one safe path component.

    Directory parts (``/`` or ``\\``), drive letters, control characters and
    leading and trailing dots and spaces are dropped; other unsafe characters
    become ``_``; a Windows device name (``CON``, ``nul``, ``COM0``-``COM9``,
    ``LPT0``-``LPT9``, …, with any extensions: ``CON.tar.gz``) is prefixed
    with ``_``; the result is at most 120 characters with the extension kept.
    An empty result becomes ``fallback``. The same on every operating system.
    """
    base = (name or "").replace("\\", "/").split("/")[-1]
    base = base.split(":")[-1]  # drive letters and NTFS streams
    cleaned = _clean(base)
    if not cleaned or cleaned in {".", ".."}:
        cleaned = _clean(fallback) or "file"
    stem, dot, ext = cleaned.rpartition(".")
    if not dot:
        stem, ext = cleaned, ""
    if cleaned.split(".", 1)[0].lower() in _WINDOWS_RESERVED:
        cleaned = "_" + cleaned
        stem = "_" + stem
    if len(cleaned) > _MAX_NAME:
        ext = ext[:10]
        keep = _MAX_NAME - len(ext) - 10
        cleaned = f"{stem[:keep]}-{_short_hash(cleaned)}" + (f".{ext}" if ext else "")
    return cleaned


def safe_join(root: Path, *parts: str) -> Path:
    """Return ``root / parts`` resolved, raising :class:`ValueError` if it leaves ``root``.

    Symbolic links are followed before the check, so a link planted inside
    the output directory cannot redirect a write outside it.
    """
    base = root.resolve()
    target = base.joinpath(*parts).resolve()
    if target == base or not target.is_relative_to(base):
        raise ValueError(f"refusing to write outside the output directory: {parts!r}")
    return target


def remove_leftovers(root: Path) -> int:
    """Remove the hidden ``.part`` files a killed run left in ``root`` and its subdirectories.

    Only this module's own temporary names (a leading dot, the ``.part`` suffix)
    are touched, one level deep (where the writers put them), and only those no
    live writer holds (:func:`litfetch_df.store.atomic.abandoned`): several runs, or
    the partitions of one Dask run, may write into one directory at once.
    Returns how many were removed.
    """
    removed = 0
    try:
        tops = list(os.scandir(root))
    except OSError:
        return 0
    dirs = [root, *(Path(e.path) for e in tops if e.is_dir(follow_symlinks=False))]
    for folder in dirs:
        try:
            entries = tops if folder == root else list(os.scandir(folder))
        except OSError:
            continue
        for entry in entries:
            name = entry.name
            ours = name.startswith(".") and name.endswith(PART_SUFFIX)
            if ours and entry.is_file(follow_symlinks=False) and abandoned(entry.path):
                with contextlib.suppress(OSError):
                    os.unlink(entry.path)
                    removed += 1
    return removed


_Identity = tuple[str | None, str | None, str | None, str | None]


def _folded(location: str) -> str:
    """What a location is on a filesystem that ignores case and Unicode normalisation.

    macOS and Windows hold ``Data.csv`` and ``data.csv`` (or a composed and a
    decomposed ``é``) as one file: claims compare this form, so such names get
    distinct names everywhere, Linux included.
    """
    return unicodedata.normalize("NFC", location).casefold()


def _identity(ids: ArticleIds) -> _Identity:
    """What names one article's body: its ids, the DOI case-folded as everywhere else."""
    doi = doi_key(ids.doi) if ids.doi else None
    return (ids.pmid, ids.pmcid, doi, ids.bookid)


def _covers(whole: _Identity, part: _Identity) -> bool:
    """Whether ``part`` may be ``whole`` half resolved: every id it has, ``whole`` has too."""
    return all(p is None or p == w for w, p in zip(whole, part, strict=True))


class Names:
    """Deterministic, collision-free names for one run's output, under some root.

    Names are deterministic (the same article and file get the same name on
    a re-run, so a re-run overwrites rather than piling up copies). When two
    different things would get the same name within one run, the later one
    gets a short hash of its identity appended. Where a name lives is the
    subclass's: :meth:`_locate` turns safe relative parts into a location.
    """

    def __init__(self) -> None:
        self._claimed: dict[str, str] = {}
        # Body stems by article identity, and the identity owning each stem.
        self._stems: dict[_Identity, str] = {}
        self._stem_owner: dict[str, _Identity] = {}
        # Stems owned by a provisional bundle (its resolution was given up) for now.
        self._tentative: set[str] = set()

    def _locate(self, parts: list[str]) -> str:
        """Return the location of the safe relative ``parts`` (raise if it leaves the root)."""
        raise NotImplementedError

    def locate(self, name: str) -> str:
        """Return the location of the file ``name`` directly under the root (made safe first)."""
        return self._locate([safe_filename(name)])

    def _claim(self, parts: list[str], identity: str) -> str:
        location = self._locate(parts)
        owner = self._claimed.get(_folded(location))
        if owner is not None and owner != identity:
            name = parts[-1]
            stem, dot, ext = name.rpartition(".")
            if not dot:
                stem, ext = name, ""
            parts = [*parts[:-1], f"{stem}-{_short_hash(identity)}" + (f".{ext}" if ext else "")]
            location = self._locate(parts)
        self._claimed[_folded(location)] = identity
        return location

    def reserve_bodies(
        self, bundles: Iterable[ArticleIds], provisional: Collection[int] = ()
    ) -> None:
        """Decide the body name of every bundle, in the order given (a frame's row order).

        Called before any body is fetched, so that when two bundles share a stem
        the first row keeps the plain name whichever body arrives first, and a
        re-run of the same frame names every body as the first call did.

        ``provisional``: the positions of bundles whose resolution was given up
        (ids missing). One holds a plain name only until a later bundle that
        has every id it has (and more) claims it, then moves aside to a name of
        its own: once resolved it may well be that bundle, and the name must be
        the one a run without the failure gives both.
        """
        late = frozenset(provisional)
        for i, ids in enumerate(bundles):
            if not ids.is_empty():
                self._body_stem(ids, provisional=i in late)

    def _body_stem(self, ids: ArticleIds, *, provisional: bool = False) -> str:
        identity = _identity(ids)
        stem = self._stems.get(identity)
        if stem is not None:
            return stem
        stem = id_stem(ids)
        owner = self._stem_owner.setdefault(stem, identity)
        if owner == identity:
            if provisional:
                self._tentative.add(stem)
        elif stem in self._tentative and not provisional and _covers(identity, owner):
            # The provisional owner may be this article half resolved: this bundle takes
            # the plain stem, the provisional one a name of its own.
            self._tentative.discard(stem)
            aside = f"{stem}-{_short_hash(repr(owner))}"
            self._stem_owner.setdefault(aside, owner)
            self._stems[owner] = aside
            self._stem_owner[stem] = identity
        else:
            stem = f"{stem}-{_short_hash(repr(identity))}"
            self._stem_owner.setdefault(stem, identity)
        self._stems[identity] = stem
        return stem

    def hold_body(self, ids: ArticleIds, location: str) -> None:
        """Say a body an earlier run wrote at ``location`` for ``ids`` stays (not redone now).

        Call after :meth:`reserve_bodies`. No other article's body is then
        written there: one whose name became that location since (a row
        resolved late, contradicting this one's ids) gets a name of its own.
        """
        self._claimed.setdefault(_folded(location), "body " + self._body_stem(ids))

    def body_location(self, ids: ArticleIds, media_type: str | None) -> str:
        """Return where an article body goes: ``<id stem><extension>`` under the root."""
        stem = self._body_stem(ids)
        name = safe_filename(stem + extension_for(media_type), fallback=stem)
        return self._claim([name], "body " + stem)

    def file_location(self, ids: ArticleIds, file: File) -> str:
        """Return where a file-set member goes: ``<id stem>/<safe upstream filename>``."""
        stem = safe_filename(id_stem(ids))
        fallback = file.uri.rstrip("/").split("/")[-1].split("?")[0] if file.uri else ""
        name = file.filename or fallback
        if not name or not _clean(name):
            name = f"{file.source}-{file.kind.value}" + extension_for(file.media_type)
        elif "." not in _clean(name.replace("\\", "/").split("/")[-1]):
            name = name + extension_for(file.media_type)
        identity = repr((file.source, file.uri, file.filename, file.media_type))
        return self._claim([stem, safe_filename(name, fallback=file.source)], identity)


class LocalStaged:
    """Where one download to a local output directory goes: its final path (written atomically).

    :attr:`path` is checked to lie inside the directory; :meth:`commit`
    returns it as text (the download itself already renamed it into place).
    """

    def __init__(self, path: Path) -> None:
        self.path = path

    def commit(self) -> str:
        """Return the final path, as the row's ``path`` cell holds it."""
        return str(self.path)


class OutDir(Names):
    """One run's output directory on the local disk: hands out safe, collision-free paths.

    ``root`` may be a path or a ``file://`` URL. Writes are atomic (a hidden
    ``.part`` file renamed into place); the leftovers of a killed run are swept
    when the directory is opened.
    """

    def __init__(self, root: str | os.PathLike[str]) -> None:
        super().__init__()
        self.root = local_root(root)
        self.root.mkdir(parents=True, exist_ok=True)
        # A run killed mid-write leaves its temporary files; the next run sweeps them.
        remove_leftovers(self.root)

    def __repr__(self) -> str:
        return f"OutDir({str(self.root)!r})"

    def _locate(self, parts: list[str]) -> str:
        return str(safe_join(self.root, *parts))

    def body_path(self, ids: ArticleIds, media_type: str | None) -> Path:
        """Return the path for an article body: ``<id stem><extension>``."""
        return Path(self.body_location(ids, media_type))

    def file_path(self, ids: ArticleIds, file: File) -> Path:
        """Return the path for a file-set member: ``<id stem>/<safe upstream filename>``."""
        return Path(self.file_location(ids, file))

    def checked(self, path: Path) -> Path:
        """Return ``path`` (which must come from this object) checked again to lie inside.

        Resolved anew, so a symbolic link planted since the name was handed out
        cannot carry the write elsewhere; raises :class:`ValueError` if it would.
        """
        return safe_join(self.root, str(path.relative_to(self.root.resolve())))

    def write(self, path: Path, data: bytes) -> Path:
        """Write ``data`` atomically at ``path`` (which must come from this object)."""
        checked = self.checked(path)
        write_atomic(checked, data)
        return checked

    def write_to(self, location: str, data: bytes) -> str:
        """Write ``data`` atomically at ``location`` (from this object); return where, as text."""
        return str(self.write(Path(location), data))

    def remove(self, location: str) -> None:
        """Remove the file at ``location`` if it lies in this directory (quietly if absent)."""
        with contextlib.suppress(OSError, ValueError):
            self.checked(Path(location)).unlink()

    @contextlib.contextmanager
    def staged(self, location: str) -> Iterator[LocalStaged]:
        """Yield the checked final path to download into (the download renames it in place)."""
        yield LocalStaged(self.checked(Path(location)))


def local_root(root: str | os.PathLike[str]) -> Path:
    """Return the local directory ``root`` names: a path, or a ``file://`` URL's path."""
    text = os.fspath(root)
    if isinstance(text, str) and text[:7].lower() == "file://":
        parsed = urllib.parse.urlsplit(text)
        if parsed.netloc not in ("", "localhost"):
            raise ValueError(f"a file:// URL names a file on another host: {text!r}")
        return Path(urllib.request.url2pathname(parsed.path)).expanduser()
    return Path(text).expanduser()
