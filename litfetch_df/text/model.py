"""The values a parsed body becomes: a frozen :class:`Document` and its parts."""

from __future__ import annotations

from dataclasses import dataclass

__all__ = [
    "Abstract",
    "Caption",
    "Citation",
    "Document",
    "Formula",
    "Paragraph",
    "Reference",
    "Section",
    "Statement",
    "TextLoss",
]


@dataclass(frozen=True, slots=True)
class TextLoss:
    """Text the reader did not render: which element, how many times, how many characters."""

    element: str
    count: int
    chars: int


@dataclass(frozen=True, slots=True)
class Section:
    """One section of the tree; ``path`` is the titles from the top down."""

    title: str
    label: str
    section_type: str
    depth: int
    path: tuple[str, ...]
    children: tuple[Section, ...] = ()


@dataclass(frozen=True, slots=True)
class Paragraph:
    """One block of body text with where it sits in :attr:`Document.body_text`."""

    text: str
    section_path: tuple[str, ...]
    section_type: str
    start: int
    end: int


@dataclass(frozen=True, slots=True)
class Abstract:
    """One abstract (``abstract_type`` ``''`` for the main one) and its language."""

    text: str
    abstract_type: str
    language: str
    title: str = ""


@dataclass(frozen=True, slots=True)
class Caption:
    """A figure's or table's label and caption, with a table's cell texts."""

    kind: str  # "figure" or "table"
    label: str
    caption: str
    cells: tuple[tuple[str, ...], ...] = ()


@dataclass(frozen=True, slots=True)
class Formula:
    """A display or inline formula as rendered (TeX, MathML text or placeholder)."""

    text: str
    notation: str  # "tex", "mathml" or "placeholder"
    display: bool


@dataclass(frozen=True, slots=True)
class Reference:
    """One entry of the reference list."""

    ref_id: str
    label: str
    doi: str
    pmid: str
    pmcid: str
    title: str
    source: str
    year: str
    authors: tuple[str, ...]
    raw: str


@dataclass(frozen=True, slots=True)
class Citation:
    """An in-text citation: which reference, in which paragraph, at which characters."""

    ref_id: str
    paragraph: int
    start: int
    end: int


@dataclass(frozen=True, slots=True)
class Statement:
    """A statement kept outside the sections (JATS ``<funding-statement>``, an author note).

    ``statement_type`` is one of the back-matter :data:`~litfetch_df.text.SECTION_TYPES`
    (``funding``, ``data availability``, ``competing interests``, ``author contributions``).
    """

    statement_type: str
    text: str


@dataclass(frozen=True, slots=True)
class Document:
    """Everything read from one body; ``text_error`` is set when it could not be read."""

    text_format: str = ""
    article_type: str = ""
    title: str = ""
    abstracts: tuple[Abstract, ...] = ()
    keywords: tuple[str, ...] = ()
    sections: tuple[Section, ...] = ()
    paragraphs: tuple[Paragraph, ...] = ()
    captions: tuple[Caption, ...] = ()
    formulas: tuple[Formula, ...] = ()
    footnotes: tuple[str, ...] = ()
    references: tuple[Reference, ...] = ()
    citations: tuple[Citation, ...] = ()
    statements: tuple[Statement, ...] = ()
    text_loss: tuple[TextLoss, ...] = ()
    text_error: str = ""

    @property
    def body_text(self) -> str:
        """The paragraphs joined by blank lines; paragraph offsets point into it."""
        return "\n\n".join(p.text for p in self.paragraphs)

    @property
    def abstract(self) -> str:
        """The main abstract (the first without a type, else the first)."""
        for a in self.abstracts:
            if not a.abstract_type:
                return a.text
        return self.abstracts[0].text if self.abstracts else ""

    def statement(self, section_type: str) -> str:
        """The text of every paragraph in sections of ``section_type``, then the statements
        of that type kept outside the sections, joined by blank lines (``""``: none)."""
        texts = [p.text for p in self.paragraphs if p.section_type == section_type]
        seen = set(texts)
        # A statement the back matter also has as a section is said once.
        texts += [
            s.text
            for s in self.statements
            if s.statement_type == section_type and s.text not in seen
        ]
        return "\n\n".join(texts)
