"""What the index adds to a merged talk for readers: topics from a vocabulary
kept as data (a project's topics.toml), and search terms that let compound
words and their parts find each other ("FlashAttention" / "flash attention")."""

from __future__ import annotations

import json
import re
import tomllib
from collections import Counter
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import ahocorasick

from gputalks.scraper.titles import lecture_label
from gputalks.index.merge import MergedTalk
from gputalks.project.validation import ConfigError, TopicsFile, validated
from gputalks.search.vocabulary import STOP_WORDS, french_lemmas, indexed_form
from gputalks.search.words import ASCII_WORDS, CAMEL_RE, CPP_RE, TOKEN_RE, tokens, word_line

WORD_RE = re.compile(r"[A-Za-z0-9]+")


# What a reader may type to find a talk besides its title, description and speakers.
LABEL_FIELDS = ("series", "event", "year")


def search_terms(title: str | None) -> str | None:
    """Extra words for full-text search: the parts of CamelCase words
    ("FlashAttention" -> "Flash Attention") and adjacent words joined
    ("Flash Attention" -> "FlashAttention"), so either spelling finds the other; of three parts
    or more, adjacent ones joined too ("CuTeDSL" -> "Cu Te DSL CuTe TeDSL": "cute" finds it);
    "C++" as "cpp", the word a reader's "c++" is to the search (search/words.py)."""
    if not title:
        return None
    words = WORD_RE.findall(title)
    extra = compound_parts(words) + [a + b for a, b in zip(words, words[1:]) if a.isalpha() and b.isalpha()]
    extra += ["cpp"] if "++" in title and CPP_RE.search(title.lower()) else []  # "C++", as the search's words hold it
    return " ".join(dict.fromkeys(extra)) or None


def compound_parts(words: list[str]) -> list[str]:
    """The parts of the CamelCase words among `words` ("CuTeDSL" -> Cu, Te, DSL, CuTe, TeDSL)."""
    found = []
    # A word splits only before an upper-case letter past its first: most words are skipped.
    for word in words:
        if not word[1:].islower() and not word.isdigit():
            parts = [part for part in CAMEL_RE.split(word) if part and part != word]
            found += parts + ([a + b for a, b in zip(parts, parts[1:])] if len(parts) > 2 else [])
    return found


def beyond_own_text(row: dict[str, Any]) -> str | None:
    """The talk's folder words (`folder_words`) that are no stop words and that its title, its
    compound words' parts (`search_terms`), description and speakers do not hold, by their indexed
    forms: its folder's "flash_attention.cu" adds nothing to "Flash Attention", and each word
    lengthens the row that bm25 divides a talk's score by."""
    if not row.get("folder_words"):
        return None
    own = {indexed_form(word) for name in ("title", "search_terms", "description", "speaker_names")
           for word in tokens(row.get(name) or "")}
    return " ".join(word for word in row["folder_words"].split()
                    if word not in STOP_WORDS and indexed_form(word) not in own) or None


def search_labels(row: dict[str, Any]) -> str | None:
    """What a talk is filed under, for full-text search: its series, event, year, lecture
    number and topic names, one per line ("GTC 2024", "lecture 12" and a topic's aliases find it)."""
    labels = [str(row[name]) for name in LABEL_FIELDS if row.get(name)]
    if row.get("number") is not None:
        labels.append(lecture_label(row["number"]))
    labels += json.loads(row.get("topics") or "[]")
    return "\n".join(dict.fromkeys(labels)) or None


VOCABULARY_CHUNK = 20_000  # talks whose words are read at once
# What of a talk the reader's search knows as words (search/query.py).
VOCABULARY_COLUMNS = ("title", "speaker_names", "series", "event", "topics")


class SearchWords:
    """The words of the talks' rows as a build makes them, gathered a batch of rows at a time as
    they are merged (so the index is not read back for them at the end)."""

    def __init__(self) -> None:
        self.words: set[str] = set()
        self.texts: list[str] = []

    def add(self, row: dict[str, Any]) -> None:
        self.texts.append(" ".join([str(row.get(column) or "") for column in VOCABULARY_COLUMNS]))
        if len(self.texts) >= 2000:
            self.words.update(_vocabulary_words(" ".join(self.texts)))
            self.texts.clear()

    def all(self) -> set[str]:
        self.words.update(_vocabulary_words(" ".join(self.texts)))
        self.texts.clear()
        return self.words


def write_search_vocabulary(db, vocabulary: "Vocabulary", words: set[str] | None = None) -> None:
    """What the reader's search knows (search/query.py): every word of the
    live talks' titles, speakers, series, events and topics (`words`, when the build gathered
    them as it wrote every live talk; else read from the index), every topic alias, and the
    concepts with the French words of their phrases by lemma (`Vocabulary.lemmas`)."""
    if words is None:
        words = set()
        last = db.execute("select coalesce(max(rowid), 0) from talks").fetchone()[0]
        text_sql = " || ' ' || ".join(f"coalesce({column}, '')" for column in VOCABULARY_COLUMNS)
        for start in range(0, last + 1, VOCABULARY_CHUNK):  # a chunk's text at a time: bounded memory
            text = db.execute(f"select group_concat({text_sql}, ' ') from talks where rowid > ? and rowid <= ? "
                              "and gone_since is null", [start, start + VOCABULARY_CHUNK]).fetchone()[0] or ""
            words.update(_vocabulary_words(text))
    db.execute("delete from search_words")
    db.execute("delete from topic_aliases")
    db.execute("delete from search_concepts")
    db.conn.executemany("insert or ignore into search_concepts (concept, kind, text) values (?, ?, ?)",
                        vocabulary.concepts + vocabulary.lemmas())
    db.conn.executemany("insert into search_words (word) values (?)", [(word,) for word in sorted(words)])
    db.conn.executemany("insert or ignore into topic_aliases (alias, topic) values (?, ?)",
                        [(alias, topic) for topic, alias in vocabulary.aliases])


def _vocabulary_words(text: str) -> set[str]:
    """The text's words as the search's vocabulary holds them: lower-case, longer than two
    characters, not numbers."""
    lowered = text.lower()
    found = lowered.encode().translate(ASCII_WORDS).decode().split() if lowered.isascii() \
        else TOKEN_RE.findall(lowered)  # the same words; ASCII the faster way (see word_line)
    return {word for word in set(found) if len(word) > 2 and not word.isdigit()}


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
    """Topic names in order, and every spelling of every alias in an Aho-Corasick automaton
    (pyahocorasick): matching is one pass over the text's words in C, whatever the size of
    the vocabulary (half the time of a dict lookup per run of words, at 100,000 talks)."""

    names: tuple[str, ...]
    automaton: Any  # ahocorasick.Automaton: " word word " -> the topic indexes it names; None if empty
    transcript_mentions: int = 3
    aliases: tuple[tuple[str, str], ...] = ()  # (topic, alias), as written (the search widens by them)
    concepts: tuple[tuple[str, str, str], ...] = ()  # (concept, kind, text): the search's concepts

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
        automaton = None
        if spellings:
            automaton = ahocorasick.Automaton()
            for spelling, topics in spellings.items():
                automaton.add_word(" " + " ".join(spelling) + " ", tuple(sorted(topics)))
            automaton.make_automaton()
        aliases = tuple((t["name"], alias) for t in checked["topics"] for alias in [t["name"], *t["aliases"]])
        concepts = tuple((c["name"], kind, text) for c in checked.get("concepts", [])
                         for kind, key in (("term", "terms"), ("topic", "topics"), ("en", "phrases"), ("fr", "phrases_fr"))
                         for text in c.get(key, []))
        search = checked.get("search", {})
        ignored = tuple(("", kind, word) for kind in ("ignore", "keep") for word in search.get(kind, []))
        same = tuple((forms[0], "same", form) for forms in search.get("same", []) for form in forms)
        broad = tuple((name, "broad", "") for name in search.get("broad", []))
        return cls(tuple(t["name"] for t in checked["topics"]), automaton, checked.get("transcript_mentions", 3),
                   aliases, concepts + ignored + same + broad)

    def lemmas(self) -> tuple[tuple[str, str, str], ...]:
        """The French words of the phrases and ways of writing as a reader may conjugate them, as
        (lemma, "lemma", word): found once a build, not at each start of a server (a scan of
        simplemma's 250,000 French words, 0.26 s)."""
        french = frozenset(word for _, kind, text in self.concepts if kind in ("fr", "same") for word in tokens(text))
        return tuple((lemma, "lemma", form) for form, lemma in french_lemmas(french).items())

    def _hits(self, text: str) -> Iterator[int]:
        """The topic (by index) of every run of whole words in the text spelling an alias,
        overlapping runs too ("cuda graphs" names two topics)."""
        if self.automaton is not None:
            for _, topics in self.automaton.iter(word_line(text)):
                yield from topics

    def mentions(self, text: str) -> Counter:
        """How many times each topic (by index) is named in the text."""
        return Counter(self._hits(text))

    def named(self, text: str) -> set[int]:
        """The topics (by index) the text names at least once."""
        return set(self._hits(text))

    def topics_for(self, talk: MergedTalk) -> list[str]:
        """The talk's topics, in vocabulary order: an alias in its title (its compound words'
        parts too: "HipKittens" is "hip"), description or chapters, or mentioned
        `transcript_mentions` times in its transcript."""
        row = talk.row
        # The compound words' parts, not all of `search_terms`: its joined words took as long again.
        parts = " ".join(compound_parts(WORD_RE.findall(row.get("title") or "")))
        found = self.named("\n".join(filter(None, [row.get("title"), parts, row.get("description"), row.get("event"),
                                                  *(c.get("title") for c in talk.chapters)])))
        if talk.segments:
            spoken = self.mentions("\n".join(s.get("text") or "" for s in talk.segments))
            found.update(index for index, count in spoken.items() if count >= self.transcript_mentions)
        return [self.names[index] for index in sorted(found)]
