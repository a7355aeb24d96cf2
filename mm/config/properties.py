"""Reader for the Java ``.properties`` format, as ``java.util.Properties.load`` reads it.

Rules implemented (so a ``connect-mirror-maker.properties`` reads the same here as
in MirrorMaker 2):

- a line whose first non-blank character is ``#`` or ``!`` is a comment; blank
  lines are skipped; comment lines never continue onto the next line;
- a line ending in an odd number of backslashes continues on the next line, whose
  leading blanks are dropped;
- the key ends at the first unescaped ``=``, ``:`` or blank; blanks around the
  separator are skipped, so ``k=v``, ``k: v`` and ``k v`` are all the same;
- escapes ``\\t \\n \\r \\f \\uXXXX`` are decoded, any other escaped character
  stands for itself (``\\=``, ``\\:``, ``\\\\``, ``\\ ``);
- values keep trailing blanks (Java does too; typed settings strip them later);
- a key given twice keeps its last value.
"""

from __future__ import annotations

import os
import re
from pathlib import Path

from mm.errors import ConfigError, ConfigFileError

__all__ = ["load_properties", "load_properties_with_lines", "parse_properties"]

_BLANK = " \t\f"
_SIMPLE_ESCAPES = {"t": "\t", "n": "\n", "r": "\r", "f": "\f"}
# Java ends lines only at \n, \r or \r\n (str.splitlines knows many more)
_LINE_END = re.compile(r"\r\n|\r|\n")


def parse_properties(text: str, *, source: str = "<properties>") -> dict[str, str]:
    """Parse ``.properties`` text into an ordered ``{key: value}`` dict.

    ``source`` only names the text in errors (a malformed ``\\u`` escape).
    """
    return _parse(text, source)[0]


def _parse(text: str, source: str) -> tuple[dict[str, str], dict[str, int]]:
    """({key: value}, {key: line number of its (last) definition})."""
    result: dict[str, str] = {}
    lines: dict[str, int] = {}
    for lineno, logical in _logical_lines(text):
        key_raw, value_raw = _split_key_value(logical)
        key = _unescape(key_raw, source, lineno)
        result[key] = _unescape(value_raw, source, lineno)
        lines[key] = lineno
    return result, lines


def load_properties(path: str | os.PathLike[str]) -> dict[str, str]:
    """Read and parse a properties file; an unreadable file is a ConfigError naming it.

    The file is read as UTF-8, falling back to ISO-8859-1 (what Java's
    ``Properties.load(InputStream)`` assumes) when it is not valid UTF-8.
    """
    return load_properties_with_lines(path)[0]


def load_properties_with_lines(
    path: str | os.PathLike[str],
) -> tuple[dict[str, str], dict[str, int]]:
    """:func:`load_properties`, and the line number where each key is (last) set."""
    file = Path(path)
    try:
        data = file.read_bytes()
    except OSError as exc:
        reason = exc.strerror or exc.__class__.__name__
        raise ConfigFileError(str(file), reason) from None
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError:
        text = data.decode("iso-8859-1")
    return _parse(text, str(file))


def _logical_lines(text: str) -> list[tuple[int, str]]:
    """Join continued natural lines; returns (first line number, logical line)."""
    out: list[tuple[int, str]] = []
    lines = _LINE_END.split(text)
    i = 0
    while i < len(lines):
        start = i
        line = lines[i].lstrip(_BLANK)
        i += 1
        if not line or line[0] in "#!":
            continue
        while _continues(line) and i < len(lines):
            line = line[:-1] + lines[i].lstrip(_BLANK)
            i += 1
        if _continues(line):  # a dangling backslash on the last line is dropped
            line = line[:-1]
        out.append((start + 1, line))
    return out


def _continues(line: str) -> bool:
    trailing = len(line) - len(line.rstrip("\\"))
    return trailing % 2 == 1


def _split_key_value(line: str) -> tuple[str, str]:
    i, n = 0, len(line)
    while i < n:
        ch = line[i]
        if ch == "\\":
            i += 2  # escaped character belongs to the key
            continue
        if ch in "=:" or ch in _BLANK:
            break
        i += 1
    key = line[:i]
    j = i
    while j < n and line[j] in _BLANK:
        j += 1
    if j < n and line[j] in "=:":
        j += 1
        while j < n and line[j] in _BLANK:
            j += 1
    return key, line[j:]


def _unescape(raw: str, source: str, lineno: int) -> str:
    if "\\" not in raw:
        return raw
    out: list[str] = []
    i, n = 0, len(raw)
    while i < n:
        ch = raw[i]
        if ch != "\\" or i + 1 >= n:
            out.append(ch)
            i += 1
            continue
        nxt = raw[i + 1]
        if nxt == "u":
            digits = raw[i + 2 : i + 6]
            if len(digits) != 4 or any(c not in "0123456789abcdefABCDEF" for c in digits):
                raise ConfigError(
                    f"{source} line {lineno}",
                    "\\u" + digits,
                    "a \\uXXXX escape with four hexadecimal digits",
                )
            out.append(chr(int(digits, 16)))
            i += 6
            continue
        out.append(_SIMPLE_ESCAPES.get(nxt, nxt))
        i += 2
    text = "".join(out)
    if any("\ud800" <= c <= "\udfff" for c in text):
        # \uD83D\uDE00 is one character written as a UTF-16 surrogate pair
        text = text.encode("utf-16", "surrogatepass").decode("utf-16", "replace")
    return text
