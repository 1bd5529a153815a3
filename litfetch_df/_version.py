"""The package version (single source for the User-Agent and metadata)."""

__version__ = "0.1.0"
