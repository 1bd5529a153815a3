"""Untrusted XML read safely: no entities, no DTDs, bounded size (``parse``), and only the
front matter of a document when that is all a step needs (``frontmatter``)."""
