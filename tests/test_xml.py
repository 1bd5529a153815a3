"""Hardened XML: no external entities, no DTD loading, no expansion bombs; root sniffing."""

from __future__ import annotations

from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from lxml import etree

from litfetch_df.safexml.parse import XmlError, local_name, parse_xml, root_name
from tests.conftest import data_bytes, data_path

JATS_FILES = sorted(p.name for p in data_path("jats").iterdir())

MARKER = "LITFETCH-XXE-MARKER-8f3a"


@pytest.fixture
def secret_file(tmp_path: Path) -> Path:
    path = tmp_path / "secret.txt"
    path.write_text(MARKER)
    return path


def _text_of(root: etree._Element) -> str:
    return etree.tostring(root, encoding="unicode")


@pytest.mark.parametrize("name", JATS_FILES)
def test_recorded_jats_parses_and_sniffs_as_article(name: str) -> None:
    content = data_bytes("jats", name)
    root = parse_xml(content)
    assert local_name(root) == "article"
    assert root_name(content) == "article"


def test_xml_error_is_a_value_error() -> None:
    assert issubclass(XmlError, ValueError)


@pytest.mark.parametrize(
    "content", [b"", b"   \n", b"<a>", b"not xml", b"<a></b>", b"\xff\xfe\x00<", b"<?xml?>"]
)
def test_malformed_input_raises_xml_error(content: bytes) -> None:
    with pytest.raises(XmlError):
        parse_xml(content)


@pytest.mark.parametrize("allow", [False, True])
def test_xxe_never_reads_the_local_file(secret_file: Path, allow: bool) -> None:
    doc = (
        f'<?xml version="1.0"?><!DOCTYPE root [<!ENTITY x SYSTEM "{secret_file.as_uri()}">]>'
        "<root>&x;</root>"
    ).encode()
    try:
        root = parse_xml(doc, allow_entity_decls=allow)
    except XmlError as exc:
        assert MARKER not in str(exc)
        assert not allow  # refused outright only when declarations are not allowed
        return
    assert MARKER not in _text_of(root)
    assert MARKER not in "".join(str(t) for t in root.itertext())


def test_xxe_is_refused_by_default(secret_file: Path) -> None:
    doc = (
        f'<!DOCTYPE root [<!ENTITY x SYSTEM "{secret_file.as_uri()}">]><root>&x;</root>'
    ).encode()
    with pytest.raises(XmlError, match="entities"):
        parse_xml(doc)


def test_entity_declaration_behind_a_long_comment_is_still_refused(secret_file: Path) -> None:
    pad = b"<!--" + b"x" * 200_000 + b"-->"
    doc = (
        b'<?xml version="1.0"?>'
        + pad
        + f'<!DOCTYPE root [<!ENTITY x SYSTEM "{secret_file.as_uri()}">]><root>&x;</root>'.encode()
    )
    with pytest.raises(XmlError, match="entities"):
        parse_xml(doc)


def test_entity_declaration_in_utf16_is_refused(secret_file: Path) -> None:
    doc = (
        '<?xml version="1.0" encoding="UTF-16"?>'
        f'<!DOCTYPE root [<!ENTITY x SYSTEM "{secret_file.as_uri()}">]><root>&x;</root>'
    ).encode("utf-16")
    with pytest.raises(XmlError):
        parse_xml(doc)


def test_cdata_mentioning_entity_in_the_body_still_parses() -> None:
    doc = b"<article><body><![CDATA[ write <!ENTITY x 'y'> in a DTD ]]></body></article>"
    assert local_name(parse_xml(doc)) == "article"


def _billion_laughs(levels: int = 10) -> bytes:
    decls = ['<!ENTITY lol0 "lol">']
    for i in range(1, levels):
        decls.append(f'<!ENTITY lol{i} "{f"&lol{i - 1};" * 10}">')
    return (
        f'<?xml version="1.0"?><!DOCTYPE lolz [{"".join(decls)}]><lolz>&lol{levels - 1};</lolz>'
    ).encode()


@pytest.mark.parametrize("allow", [False, True])
def test_billion_laughs_is_refused_unexpanded(allow: bool) -> None:
    # Refused outright, or parsed with nothing expanded (an expansion would be 10**9
    # characters); checked on the result, not on how long the parse took.
    try:
        root = parse_xml(_billion_laughs(), allow_entity_decls=allow)
    except XmlError:
        pass  # refused, whichever way entity declarations are treated
    else:
        assert allow  # only a parser told to allow declarations may return a tree ...
        assert len(_text_of(root)) < 10_000  # ... and then with nothing expanded


def test_external_dtd_is_not_loaded(tmp_path: Path) -> None:
    dtd = tmp_path / "ext.dtd"
    dtd.write_text(f'<!ENTITY ext "{MARKER}">\n<!ATTLIST root injected CDATA "{MARKER}-default">\n')
    doc = f'<?xml version="1.0"?><!DOCTYPE root SYSTEM "{dtd.as_uri()}"><root>x</root>'.encode()
    root = parse_xml(doc)
    assert root.get("injected") is None  # a loaded DTD would have added the default attribute
    assert MARKER not in _text_of(root)

    with_ref = doc.replace(b"<root>x</root>", b"<root>&ext;</root>")
    try:
        root = parse_xml(with_ref)
    except XmlError:
        return
    assert MARKER not in _text_of(root)


def test_comments_are_dropped_and_pis_kept() -> None:
    root = parse_xml(b"<article><!-- hidden --><?properties open_access?><p>t</p></article>")
    assert "hidden" not in _text_of(root)
    assert [local_name(c) for c in root] == ["", "p"]  # the PI has no local name


def test_local_name_strips_the_namespace() -> None:
    root = parse_xml(b'<x:article xmlns:x="http://example.org/ns"><x:p/></x:article>')
    assert root.tag == "{http://example.org/ns}article"
    assert local_name(root) == "article"
    assert local_name(root[0]) == "p"


@pytest.mark.parametrize(
    ("content", "expected"),
    [
        (b"<article/>", "article"),
        (b'<?xml version="1.0"?>\n<article>', "article"),
        (b"\xef\xbb\xbf<?xml version='1.0'?><article>", "article"),  # UTF-8 BOM
        (b"\n\n<!DOCTYPE article PUBLIC '-//NLM//DTD' 'x.dtd'>\n<article>", "article"),
        (b"<!DOCTYPE pmc-articleset><pmc-articleset><article/>", "pmc-articleset"),
        (b"<!-- <not-this/> --><book-part-wrapper>", "book-part-wrapper"),
        (
            b'<?xml-stylesheet href="a>b" <fake?><full-text-retrieval-response>',
            "full-text-retrieval-response",
        ),
        (b'<ns0:article xmlns:ns0="u"/>', "article"),
        (b"<!DOCTYPE a [ <!ELEMENT a ANY> ] >\n<a/>", "a"),  # space before the closing '>'
        (b'<!DOCTYPE a [<!ENTITY x "]>"><!-- ]> --><?pi ]>?>]><real/>', "real"),
        (b"<!DOCTYPE a PUBLIC \"[odd>\" 'x'><real/>", "real"),
        (b"<!-- never closed <a/>", None),
        (b"<!DOCTYPE a [ <!ELEMENT a ANY>", None),
        (b"no tags at all", None),
        (b"", None),
        (b"<", None),
        (b"<123/>", None),
    ],
)
def test_root_name(content: bytes, expected: str | None) -> None:
    assert root_name(content) == expected


@settings(max_examples=300, deadline=None)
@given(content=st.one_of(st.binary(max_size=200), st.text(max_size=200).map(str.encode)))
def test_root_name_and_parse_xml_only_raise_xml_error(content: bytes) -> None:
    name = root_name(content)
    assert name is None or isinstance(name, str)
    try:
        root = parse_xml(content)
    except XmlError:
        return
    assert root_name(content) == local_name(root)


@settings(max_examples=200, deadline=None)
@given(
    prolog=st.lists(
        st.sampled_from(
            [
                b'<?xml version="1.0"?>',
                b"<!-- a comment with <tags> and ]> -->",
                b"<?pi data > more?>",
                b"\n",
                b'<!DOCTYPE article PUBLIC "-//NLM//DTD JATS//EN" "JATS.dtd">',
                b"<!DOCTYPE article [ <!ELEMENT article ANY> <!ATTLIST article id CDATA '>'> ]>",
            ]
        ),
        max_size=5,
    ),
    name=st.from_regex(r"[a-z][a-z0-9-]{0,12}", fullmatch=True),
)
def test_root_name_agrees_with_the_parser(prolog: list[bytes], name: str) -> None:
    content = b"".join(prolog) + f"<{name}><child/></{name}>".encode()
    assert root_name(content) == name
    try:
        root = parse_xml(content)
    except XmlError:
        return  # e.g. two DOCTYPEs or a misplaced XML declaration
    assert local_name(root) == name
