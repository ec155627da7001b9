"""What the index adds to a merged talk for readers: topics from a vocabulary
kept as data (a project's topics.toml), and search terms that let compound
words and their parts find each other ("FlashAttention" / "flash attention")."""

from __future__ import annotations

import re
import tomllib
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
    extra = [part for word in words for part in CAMEL_RE.split(word) if part and part != word]
    extra += [a + b for a, b in zip(words, words[1:]) if a.isalpha() and b.isalpha()]
    return " ".join(dict.fromkeys(extra)) or None


def _alias_pattern(alias: str) -> str:
    words = [re.escape(w) for w in alias.split()]
    return r"(?<!\w)" + r"[\s\-]?".join(words) + r"(?!\w)"


@dataclass(frozen=True)
class Topic:
    name: str
    pattern: re.Pattern[str]


@dataclass(frozen=True)
class Vocabulary:
    topics: tuple[Topic, ...]
    transcript_mentions: int = 3

    @classmethod
    def load(cls, path: Path) -> "Vocabulary":
        try:
            data = tomllib.loads(path.read_text(encoding="utf-8"))
        except (OSError, tomllib.TOMLDecodeError) as exc:
            raise ConfigError([f"{path.name}: cannot read topics ({exc})"]) from exc
        checked = validated(TopicsFile, data, path)
        topics = tuple(Topic(t["name"], re.compile("|".join(_alias_pattern(a) for a in t["aliases"]), re.I))
                       for t in checked["topics"])
        return cls(topics, checked.get("transcript_mentions", 3))

    def topics_for(self, talk: MergedTalk) -> list[str]:
        """The talk's topics, in vocabulary order: an alias in its title, description or
        chapters, or mentioned `transcript_mentions` times in its transcript."""
        row = talk.row
        visible = "\n".join(filter(None, [row.get("title"), row.get("description"), row.get("event"),
                                          *(c.get("title") for c in talk.chapters)]))
        spoken = "\n".join(s.get("text") or "" for s in talk.segments)
        return [topic.name for topic in self.topics
                if topic.pattern.search(visible)
                or (spoken and len(topic.pattern.findall(spoken)) >= self.transcript_mentions)]
