"""What the index adds to a merged talk for readers: topics from a vocabulary
kept as data (a project's topics.toml), and search terms that let compound
words and their parts find each other ("FlashAttention" / "flash attention")."""

from __future__ import annotations

import re
import tomllib
from collections import Counter
from dataclasses import dataclass
from pathlib import Path

from .merge import MergedTalk
from .validation import ConfigError, TopicsFile, validated

CAMEL_RE = re.compile(r"(?<=[a-z0-9])(?=[A-Z])|(?<=[A-Z])(?=[A-Z][a-z])")
WORD_RE = re.compile(r"[A-Za-z0-9]+")


def search_terms(title: str | None) -> str | None:
    """Extra words for full-text search: the parts of CamelCase words
    ("FlashAttention" -> "Flash Attention") and adjacent words joined
    ("Flash Attention" -> "FlashAttention"), so either spelling finds the other."""
    if not title:
        return None
    words = WORD_RE.findall(title)
    # A word splits only before an upper-case letter past its first: most words are skipped.
    extra = [part for word in words if not word[1:].islower() and not word.isdigit()
             for part in CAMEL_RE.split(word) if part and part != word]
    extra += [a + b for a, b in zip(words, words[1:]) if a.isalpha() and b.isalpha()]
    return " ".join(dict.fromkeys(extra)) or None


TOKEN_RE = re.compile(r"\w+")


def tokens(text: str) -> list[str]:
    return TOKEN_RE.findall(text.lower())


def _spellings(alias: str) -> set[tuple[str, ...]]:
    """An alias as word sequences: each space (or hyphen, dot...) between its words may
    also be absent ("flash attention" -> ("flash", "attention") and ("flashattention",))."""
    words = tokens(alias)
    found = {()}
    for word in words:
        found = {s + (word,) for s in found} | {s[:-1] + (s[-1] + word,) for s in found if s}
    return found


@dataclass(frozen=True)
class Vocabulary:
    """Topic names in order, and every spelling of every alias mapped to its topics.

    Matching is a lookup of each run of up to `longest` words in a dict: linear in the
    text, whatever the size of the vocabulary."""

    names: tuple[str, ...]
    spellings: dict[tuple[str, ...], frozenset[int]]
    first_words: frozenset[str]  # the words a spelling starts with: any other word starts none
    longest: int
    transcript_mentions: int = 3

    @classmethod
    def load(cls, path: Path) -> "Vocabulary":
        try:
            data = tomllib.loads(path.read_text(encoding="utf-8"))
        except (OSError, tomllib.TOMLDecodeError) as exc:
            raise ConfigError([f"{path.name}: cannot read topics ({exc})"]) from exc
        checked = validated(TopicsFile, data, path)
        spellings: dict[tuple[str, ...], set[int]] = {}
        for index, topic in enumerate(checked["topics"]):
            for alias in topic["aliases"]:
                for spelling in _spellings(alias):
                    spellings.setdefault(spelling, set()).add(index)
        spellings.pop((), None)
        return cls(tuple(t["name"] for t in checked["topics"]),
                   {k: frozenset(v) for k, v in spellings.items()}, frozenset(k[0] for k in spellings),
                   max((len(k) for k in spellings), default=1), checked.get("transcript_mentions", 3))

    def mentions(self, text: str) -> Counter:
        """How many times each topic (by index) is named in the text."""
        words, found, first_words = tokens(text), Counter(), self.first_words
        # Most words start no alias: one set lookup each, in a comprehension.
        for start in [n for n, word in enumerate(words) if word in first_words]:
            for size in range(1, min(self.longest, len(words) - start) + 1):
                for index in self.spellings.get(tuple(words[start:start + size]), ()):
                    found[index] += 1
        return found

    def topics_for(self, talk: MergedTalk) -> list[str]:
        """The talk's topics, in vocabulary order: an alias in its title, description or
        chapters, or mentioned `transcript_mentions` times in its transcript."""
        row = talk.row
        found = set(self.mentions("\n".join(filter(None, [row.get("title"), row.get("description"), row.get("event"),
                                                         *(c.get("title") for c in talk.chapters)]))))
        if talk.segments:
            spoken = self.mentions("\n".join(s.get("text") or "" for s in talk.segments))
            found.update(index for index, count in spoken.items() if count >= self.transcript_mentions)
        return [self.names[index] for index in sorted(found)]
