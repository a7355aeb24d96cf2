"""The .properties reader reads files the way java.util.Properties does."""

from __future__ import annotations

from pathlib import Path

import pytest

from mm.config import load_properties, parse_properties
from mm.errors import ConfigError

pytestmark = pytest.mark.unit


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("a=1", {"a": "1"}),
        ("a: 1", {"a": "1"}),
        ("a 1", {"a": "1"}),
        ("a = 1", {"a": "1"}),
        ("a\t:\t1", {"a": "1"}),
        ("   a=1", {"a": "1"}),
        ("a=1  ", {"a": "1  "}),  # Java keeps trailing blanks of values
        ("a=", {"a": ""}),
        ("a", {"a": ""}),
        ("a==b", {"a": "=b"}),  # only the first separator is one
        ("a=b=c:d", {"a": "b=c:d"}),
        ("url = http://host:80/x", {"url": "http://host:80/x"}),
        ("A->B.enabled = true", {"A->B.enabled": "true"}),
    ],
)
def test_key_value_separators(text: str, expected: dict[str, str]) -> None:
    assert parse_properties(text) == expected


def test_comments_and_blank_lines() -> None:
    text = "# comment\n! also a comment\n   # indented comment\n\n   \na=1\n"
    assert parse_properties(text) == {"a": "1"}


def test_comment_line_ending_in_backslash_does_not_continue() -> None:
    assert parse_properties("# comment \\\na=1") == {"a": "1"}


def test_line_continuation_drops_leading_blanks() -> None:
    text = "servers = h1:9092,\\\n          h2:9092,\\\n\th3:9092\nnext=2"
    assert parse_properties(text) == {"servers": "h1:9092,h2:9092,h3:9092", "next": "2"}


def test_even_number_of_backslashes_does_not_continue() -> None:
    assert parse_properties("a=x\\\\\nb=2") == {"a": "x\\", "b": "2"}


def test_dangling_continuation_at_end_of_text() -> None:
    assert parse_properties("a=x\\") == {"a": "x"}


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        (r"a=tab\there", {"a": "tab\there"}),
        (r"a=new\nline", {"a": "new\nline"}),
        (r"a=\u0041\u00e9", {"a": "Aé"}),
        (r"a=back\\slash", {"a": "back\\slash"}),
        (r"a=\=\:\#", {"a": "=:#"}),
        (r"my\ key=v", {"my key": "v"}),
        (r"k\=ey=v", {"k=ey": "v"}),
        (r"k\:ey:v", {"k:ey": "v"}),
        (r"a=\uD83D\uDE00", {"a": "\U0001f600"}),  # surrogate pair
        # Java drops a backslash before an ordinary character: MM2 sees [-.] here
        (r"topics.exclude = .*[\-\.]internal", {"topics.exclude": ".*[-.]internal"}),
        (r"topics.exclude = .*\\.replica", {"topics.exclude": r".*\.replica"}),
    ],
)
def test_escapes(text: str, expected: dict[str, str]) -> None:
    assert parse_properties(text) == expected


def test_later_duplicate_wins() -> None:
    assert parse_properties("a=1\nb=2\na=3") == {"a": "3", "b": "2"}


def test_line_endings() -> None:
    assert parse_properties("a=1\r\nb=2\rc=3\n") == {"a": "1", "b": "2", "c": "3"}
    # only \n, \r and \r\n end lines, as in Java
    assert parse_properties("a=1\x0b2") == {"a": "1\x0b2"}


def test_malformed_unicode_escape_is_a_config_error() -> None:
    with pytest.raises(ConfigError) as info:
        parse_properties("ok=1\nbad=\\u12G4", source="mm2.properties")
    assert info.value.key == "mm2.properties line 2"
    assert "four hexadecimal digits" in str(info.value)


def test_load_properties_reads_file(tmp_path: Path) -> None:
    path = tmp_path / "mm2.properties"
    path.write_text("clusters = A, B\nA.bootstrap.servers = a:9092\n", encoding="utf-8")
    assert load_properties(path) == {"clusters": "A, B", "A.bootstrap.servers": "a:9092"}


def test_load_properties_falls_back_to_latin1(tmp_path: Path) -> None:
    path = tmp_path / "mm2.properties"
    path.write_bytes("name=caf\xe9".encode("iso-8859-1"))
    assert load_properties(path) == {"name": "café"}


def test_unreadable_file_names_the_path(tmp_path: Path) -> None:
    missing = tmp_path / "nope.properties"
    with pytest.raises(ConfigError) as info:
        load_properties(missing)
    assert info.value.value == str(missing)
    assert str(missing) in str(info.value)
    assert "readable" in info.value.expected
