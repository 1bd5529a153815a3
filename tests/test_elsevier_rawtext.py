"""Elsevier answers that carry the article only as <xocs:rawtext> (issue 15).

Shaped as older Elsevier full-text answers are (written for these tests; no
real body is kept): coredata, then ``originalText`` whose ``xocs:doc`` holds a
``xocs:rawtext`` and no ``ce:sections``.
"""

from __future__ import annotations

from litfetch_df import ELSEVIER_XML, Blob, Session
from litfetch_df.sources.elsevier import RAW_TEXT_ONLY, is_full_text, is_raw_text_only
from tests.fake_upstream import FakeUpstream, xml_response
from tests.test_elsevier import ELSEVIER, FULL_TEXT, fetch, route_elsevier

SENTENCE = "The fathead minnow is a teleost model for endocrine disruption studies. "


def raw_text_answer(characters: int) -> bytes:
    text = (SENTENCE * (characters // len(SENTENCE) + 1))[:characters]
    return (
        '<?xml version="1.0" encoding="UTF-8"?>\n'
        '<full-text-retrieval-response xmlns="http://www.elsevier.com/xml/svapi/article/dtd"'
        ' xmlns:dc="http://purl.org/dc/elements/1.1/"'
        ' xmlns:prism="http://prismstandard.org/namespaces/basic/2.0/"'
        ' xmlns:xocs="http://www.elsevier.com/xml/xocs/dtd">'
        "<coredata><prism:doi>10.1016/0000-0000(98)00001-1</prism:doi>"
        "<dc:title>An older article</dc:title><openaccess>0</openaccess>"
        "<dc:description>Abstract text.</dc:description></coredata>"
        "<originalText><xocs:doc><xocs:meta><xocs:pii-formatted>x</xocs:pii-formatted>"
        f"</xocs:meta><xocs:rawtext> {text} </xocs:rawtext></xocs:doc></originalText>"
        "</full-text-retrieval-response>"
    ).encode()


def test_substantial_raw_text_is_full_text() -> None:
    answer = raw_text_answer(24_000)  # the size of the recorded answer the issue describes
    assert is_full_text(answer)
    assert is_raw_text_only(answer)


def test_a_raw_text_the_size_of_an_abstract_is_not() -> None:
    answer = raw_text_answer(1_800)
    assert not is_full_text(answer)
    assert not is_raw_text_only(answer)


def test_structured_full_text_is_not_raw_text_only() -> None:
    assert is_full_text(FULL_TEXT)
    assert not is_raw_text_only(FULL_TEXT)
    with_both = FULL_TEXT.replace(
        b"</xocs:doc>", b"<xocs:rawtext>" + b"x" * 10_000 + b"</xocs:rawtext></xocs:doc>"
    )
    assert not is_raw_text_only(with_both)


async def test_fetcher_accepts_raw_text_and_says_so(
    fake: FakeUpstream, fake_session: Session
) -> None:
    route_elsevier(fake, xml_response(raw_text_answer(24_000)))
    blob = await fetch(fake_session)
    assert isinstance(blob, Blob)
    assert blob.file.media_type == ELSEVIER_XML
    assert blob.file.description == RAW_TEXT_ONLY
    assert fake.count(ELSEVIER) == 1


async def test_fetcher_still_declines_an_abstract_with_a_short_raw_text(
    fake: FakeUpstream, fake_session: Session
) -> None:
    route_elsevier(fake, xml_response(raw_text_answer(1_800)))
    assert await fetch(fake_session) is None


async def test_structured_body_carries_no_raw_text_note(
    fake: FakeUpstream, fake_session: Session
) -> None:
    route_elsevier(fake)
    blob = await fetch(fake_session)
    assert isinstance(blob, Blob) and blob.file.description is None
