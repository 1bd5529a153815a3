"""Package-level defaults for the DataFrame face, read from the environment.

Every ``.lit`` method takes its configuration as keyword arguments; anything
left out comes from here. The defaults start from the conventional
environment variables (``NCBI_API_KEY``, ``ELSEVIER_API_KEY``,
``SPRINGER_API_KEY``, ``SPRINGER_META_API_KEY``, ``SEMANTIC_SCHOLAR_API_KEY``,
``OPENALEX_API_KEY`` for credentials; ``LITFETCH_DF_CONTACT`` for the contact
email; ``LITFETCH_DF_CACHE_DIR`` and ``LITFETCH_DF_OFFLINE`` for the persistent
cache) and can be changed with :func:`set_options` or, for a block of code,
with :func:`option_context`::

    import litfetch_df as lf
    lf.frame.options.set_options(contact="me@lab.example")
    with lf.frame.options.option_context(concurrency=8, progress=False):
        out = df.lit.fetch_bodies()

Reprs show which credentials are set, never their values.
"""

from __future__ import annotations

import contextlib
import dataclasses
import os
import re
import threading
from collections.abc import Iterator, Mapping
from pathlib import Path
from types import MappingProxyType
from typing import Any, Final

__all__ = [
    "CONTACT_ENV",
    "ENV_CREDENTIALS",
    "Options",
    "get_options",
    "option_context",
    "options_from_env",
    "reset_options",
    "set_options",
]

ENV_CREDENTIALS: Final[Mapping[str, str]] = MappingProxyType(
    {
        "NCBI_API_KEY": "ncbi_api_key",
        "ELSEVIER_API_KEY": "elsevier_api_key",
        "SPRINGER_API_KEY": "springer_api_key",
        "SPRINGER_META_API_KEY": "springer_meta_api_key",
        "SEMANTIC_SCHOLAR_API_KEY": "semantic_scholar_api_key",
        "OPENALEX_API_KEY": "openalex_api_key",
    }
)
"""Environment variable → ``credentials`` key it fills."""

CONTACT_ENV: Final = "LITFETCH_DF_CONTACT"
"""Environment variable holding the contact email (polite pools, Unpaywall)."""

CACHE_ENV: Final = "LITFETCH_DF_CACHE_DIR"
"""Environment variable naming a persistent response-cache directory."""

OFFLINE_ENV: Final = "LITFETCH_DF_OFFLINE"
"""Environment variable: ``1``/``true`` answers only from the persistent cache."""

DEFAULT_CONCURRENCY: Final = 32
"""Units of work in flight at once; per-host pacing is the session's job, not this bound's."""

_TRUE = frozenset({"1", "true", "yes", "on"})
_CONTROL = re.compile(r"[\x00-\x1f\x7f]")


@dataclasses.dataclass(frozen=True, slots=True)
class Options:
    """The settings a ``.lit`` call runs with.

    ``contact`` is the email sent to polite pools (and required by Unpaywall);
    ``credentials`` the per-user keys (see the credentials table of the API);
    ``concurrency`` how many units of work are in flight at once; ``cache`` a
    persistent response-cache directory (``None``: no cache); ``offline``
    answers only from that cache; ``progress`` ``True``/``False`` forces the
    progress bar on/off, ``None`` shows it only for runs longer than a couple
    of seconds; ``timeout`` is the HTTP timeout in seconds;
    ``allow_private_network`` ``True`` lets the call's session connect to
    loopback and private addresses (an intranet mirror), ``None`` leaves it to
    the ``LITFETCH_DF_ALLOW_PRIVATE_NETWORK`` environment variable (off).
    """

    contact: str | None = None
    credentials: Mapping[str, object] = dataclasses.field(
        default_factory=lambda: MappingProxyType({})
    )
    concurrency: int = DEFAULT_CONCURRENCY
    cache: str | os.PathLike[str] | None = None
    offline: bool = False
    progress: bool | None = None
    timeout: float = 30.0
    allow_private_network: bool | None = None

    def __post_init__(self) -> None:
        if isinstance(self.concurrency, bool) or not isinstance(self.concurrency, int):
            raise TypeError(f"concurrency must be an int, got {type(self.concurrency).__name__}")
        if self.concurrency < 1:
            raise ValueError(f"concurrency must be at least 1, got {self.concurrency}")
        if not self.timeout > 0:
            raise ValueError(f"timeout must be positive, got {self.timeout!r}")
        contact = self.contact.strip() if isinstance(self.contact, str) else None
        object.__setattr__(self, "contact", contact or None)
        # A read-only copy: later edits to the caller's dict must not leak in.
        clean = {str(k): v for k, v in dict(self.credentials).items() if v not in (None, "")}
        for name, value in clean.items():
            if isinstance(value, str) and _CONTROL.search(value.strip()):
                # A key with a newline becomes an illegal header whose error text (the
                # value included) the HTTP stack logs; refuse it here, without echoing it.
                raise ValueError(
                    f"credential {name!r} contains a control character (a newline, a tab?); "
                    "check how the key was pasted or read"
                )
        object.__setattr__(self, "credentials", MappingProxyType(clean))

    def __repr__(self) -> str:
        creds = ", ".join(f"{k!r}: '***'" for k in sorted(self.credentials))
        return (
            f"Options(contact={self.contact!r}, credentials={{{creds}}}, "
            f"concurrency={self.concurrency}, cache={self.cache!r}, offline={self.offline}, "
            f"progress={self.progress}, timeout={self.timeout}, "
            f"allow_private_network={self.allow_private_network})"
        )

    __str__ = __repr__

    def replace(self, **changes: Any) -> Options:
        """Return a copy with ``changes`` applied; ``None`` values are ignored.

        ``credentials`` is merged over the current map (a key given as ``None``
        removes it), so a call can add one key without repeating the others.
        """
        return _apply(self, changes)


_FIELDS = frozenset(f.name for f in dataclasses.fields(Options))


def _apply(base: Options, changes: Mapping[str, Any]) -> Options:
    unknown = set(changes) - _FIELDS
    if unknown:
        raise TypeError(f"unknown option(s) {sorted(unknown)}; known: {sorted(_FIELDS)}")
    values: dict[str, Any] = {f: getattr(base, f) for f in _FIELDS}
    for name, value in changes.items():
        if name == "credentials":
            if value is None:
                continue
            merged = dict(base.credentials)
            for k, v in dict(value).items():
                if v is None:
                    merged.pop(str(k), None)
                else:
                    merged[str(k)] = v
            values["credentials"] = merged
        elif value is not None:
            values[name] = value
    return Options(**values)


def options_from_env(environ: Mapping[str, str] | None = None) -> Options:
    """Return the defaults implied by the environment (``os.environ`` unless given)."""
    env = os.environ if environ is None else environ
    credentials = {
        key: env[var].strip() for var, key in ENV_CREDENTIALS.items() if env.get(var, "").strip()
    }
    cache = env.get(CACHE_ENV, "").strip() or None
    return Options(
        contact=env.get(CONTACT_ENV) or None,
        credentials=credentials,
        cache=Path(cache).expanduser() if cache else None,
        offline=env.get(OFFLINE_ENV, "").strip().lower() in _TRUE,
    )


_lock = threading.Lock()
_current: Options | None = None


def get_options() -> Options:
    """Return the package-level defaults (read from the environment on first use)."""
    global _current
    with _lock:
        if _current is None:
            _current = options_from_env()
        return _current


def set_options(**changes: Any) -> Options:
    """Change the package-level defaults and return the new :class:`Options`.

    Accepts the fields of :class:`Options`; ``None`` leaves a field as it is
    and ``credentials`` is merged (see :meth:`Options.replace`).
    """
    global _current
    base = get_options()
    new = _apply(base, changes)
    with _lock:
        _current = new
    return new


def reset_options() -> Options:
    """Forget every change and re-read the environment; return the fresh defaults."""
    global _current
    fresh = options_from_env()
    with _lock:
        _current = fresh
    return fresh


@contextlib.contextmanager
def option_context(**changes: Any) -> Iterator[Options]:
    """Apply ``changes`` for the duration of a ``with`` block, then restore the defaults.

    Yields the options in force inside the block.
    """
    global _current
    previous = get_options()
    new = _apply(previous, changes)
    with _lock:
        _current = new
    try:
        yield new
    finally:
        with _lock:
            _current = previous


def effective(**overrides: Any) -> Options:
    """Return the package defaults with one call's keyword ``overrides`` applied."""
    return _apply(get_options(), overrides)
