"""Parse a Kafka ``sasl.jaas.config`` value into its login module and options.

Grammar (one entry, as Kafka clients accept it)::

    <LoginModuleClass> <required|requisite|sufficient|optional> (<name>=<value>)* ;

Values are bare words or double-quoted strings with backslash escapes.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

__all__ = ["JaasEntry", "parse_jaas"]

_TOKEN = re.compile(
    r"""\s*(?:
        (?P<name>[A-Za-z_][\w.\-]*)\s*=\s*(?:"(?P<quoted>(?:[^"\\]|\\.)*)"|(?P<bare>[^\s;"]+))
      | (?P<word>[A-Za-z_$][\w.$]*)
      | (?P<end>;)
    )""",
    re.VERBOSE | re.DOTALL,
)
_FLAGS = {"required", "requisite", "sufficient", "optional"}


@dataclass(frozen=True, repr=False)
class JaasEntry:
    login_module: str
    flag: str
    options: dict[str, str] = field(default_factory=dict)

    def __repr__(self) -> str:  # options carry passwords
        return f"JaasEntry({self.login_module!r}, {self.flag!r}, options={sorted(self.options)})"


def parse_jaas(text: str) -> JaasEntry:
    """Parse one JAAS entry; ValueError (without the text, it holds secrets) if malformed."""
    pos = 0
    words: list[str] = []
    options: dict[str, str] = {}
    text = text.strip()
    while pos < len(text):
        m = _TOKEN.match(text, pos)
        if not m or m.end() == pos:
            raise ValueError(f"unexpected text at character {pos}")
        pos = m.end()
        if m["end"]:
            if text[pos:].strip():
                raise ValueError("only one login module entry is supported")
            break
        if m["name"]:
            if len(words) != 2:
                raise ValueError("option before '<LoginModule> <flag>'")
            quoted = m["quoted"]
            options[m["name"]] = (
                re.sub(r"\\(.)", r"\1", quoted, flags=re.DOTALL)
                if quoted is not None
                else m["bare"]
            )
        else:
            words.append(m["word"])
            if len(words) > 2:
                raise ValueError("expected name=value options after the control flag")
    if len(words) != 2 or words[1].lower() not in _FLAGS:
        raise ValueError("expected '<LoginModule> required|requisite|sufficient|optional'")
    return JaasEntry(words[0], words[1].lower(), options)
