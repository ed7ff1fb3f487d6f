"""One way to make a string from a session, a library or the target safe to print.

Such strings reach terminals (``show``, ``sessions``, ``diff``, summaries, the TUI) and markdown
files people share. A control character in them is an instruction, not text: ``ESC ] 52`` writes
the clipboard, ``ESC ] 0`` the window title, a C1 ``CSI`` moves the cursor, a line break forges
a line of output, a bidi override reorders what is read. ``visible`` spells every such character
as a backslash escape (``\\x1b``, ``\\n``, ``\\u202e``), so it shows and does nothing; tabs stay.
Lone surrogates (bytes that were not UTF-8) become ``\\udcXX`` for the same reason: a terminal's
encoder would refuse them.
"""
from __future__ import annotations

import functools
import re
TYPE_CHECKING = False  # typing costs ~5-10 ms of a warm `pttrace where` (target 0.1 s); mypy reads it as typing's
if TYPE_CHECKING:
    from typing import Any

# C0 but tab, DEL, C1, the bidi controls, line/paragraph separators and surrogates.
_UNSAFE = "[\x00-\x08\x0a-\x1f\x7f-\x9f\u061c\u200e\u200f\u2028-\u202e\u2066-\u2069\ud800-\udfff]"


@functools.cache
def _unsafe_re() -> re.Pattern:
    """Compiled at the first text that is not printable: ~0.9 ms that a `pttrace where` whose output is all
    printable (nearly every one) does not pay."""
    return re.compile(_UNSAFE)


_NAMED = {"\n": "\\n", "\r": "\\r"}


def _escape(m: re.Match) -> str:
    ch = m.group()
    named = _NAMED.get(ch)
    if named is not None:
        return named
    n = ord(ch)
    return f"\\x{n:02x}" if n < 0x100 else f"\\u{n:04x}"


def visible(text: str) -> str:
    """``text`` with every control character spelled out; most strings come back unchanged, fast."""
    if text.isprintable() or not _unsafe_re().search(text):
        return text
    return _unsafe_re().sub(_escape, text)


def clean(value: Any) -> Any:
    """``visible`` applied to every string (keys included) of a decoded JSON value, in place for containers."""
    if isinstance(value, str):
        return visible(value)
    if isinstance(value, list):
        for i, item in enumerate(value):
            value[i] = clean(item)
        return value
    if isinstance(value, dict):
        return {visible(k) if isinstance(k, str) else k: clean(v) for k, v in value.items()}
    return value


# In a JSON line a control character can only come from an escape (``\u001b``, ``\n``...) or raw
# bytes (DEL, C1 and bidi controls in UTF-8; bytes that are not UTF-8 are caught by decoding): this
# finds both, so that the lines of a session that hold none (nearly all) are not walked at all.
_JSON_UNSAFE = (
    rb"\\(?:[nrbf]|u(?:00[01]|007[fF]|00[89]|061[cC]|200[eEfF]|202[89a-eA-E]|206[6-9]|[dD][89a-fA-F]))"
    rb"|\x7f|\xc2[\x80-\x9f]|\xd8\x9c|\xe2\x80[\x8e\x8f\xa8-\xae]|\xe2\x81[\xa6-\xa9]"
)


@functools.cache
def _json_unsafe_re() -> re.Pattern[bytes]:
    return re.compile(_JSON_UNSAFE)


def json_line_may_hide_controls(raw: bytes) -> bool:
    if raw.isascii() and b"\\" not in raw and b"\x7f" not in raw:
        return False
    return _json_unsafe_re().search(raw) is not None


def gdb_regex_literal(path: str) -> str:
    """A regex (for gdb's ``sharedlibrary``) matching exactly this path. A line break cannot reach gdb
    in a command: ``.`` stands for it (a library ``dlopen``ed from such a path still gets its symbols)."""
    special = set("\\.[]*^$")  # POSIX basic regex: (){}+?| are literal unless escaped
    return "^" + "".join("\\" + ch if ch in special else "." if ch in "\r\n" else ch for ch in path) + "$"
