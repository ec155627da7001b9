"""The search's words: how a text (a title, a topic's alias, a reader's query) splits into the
words the index stores and the query parser matches; one tokenizer for the build and the reader."""

from __future__ import annotations

import re

TOKEN_RE = re.compile(r"\w+")


def tokens(text: str) -> list[str]:
    return TOKEN_RE.findall(text.lower())


def holds_run(words: tuple[str, ...], run: tuple[str, ...]) -> bool:
    """Whether `run` is found in `words`, its words in a row."""
    return any(words[n:n + len(run)] == run for n in range(len(words) - len(run) + 1))


# ASCII bytes: a word character (`\w`) stays, anything else becomes a space.
ASCII_WORDS = bytes(c if chr(c).isalnum() or chr(c) == "_" else 32 for c in range(128)) + b" " * 128


def word_line(text: str) -> str:
    """The text's `tokens` between single spaces, with one at each end (" flash attention ").
    ASCII text takes C's byte translation and split, 4x faster than the regex it equals."""
    lowered = text.lower()
    if lowered.isascii():
        return " " + b" ".join(lowered.encode().translate(ASCII_WORDS).split()).decode() + " "
    return " " + " ".join(TOKEN_RE.findall(lowered)) + " "
