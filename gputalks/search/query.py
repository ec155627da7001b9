"""A reader's words as an FTS5 query: the one ranking of talks, shared by `/search`,
`/search.json`, the `search_talks` canned query, `gputalks search` and the static site.

The ranking itself is SQL (`talks.sql` beside this file): talks whose title holds every
word first (the shortest title first), then talks holding every word anywhere, then talks
holding any word, each by bm25 over title, compound words, description, speakers and labels
(series, event, year, topics). This module turns the words into the FTS5
expressions it matches, through the SQL function `gputalks_search(q, mode)` that
`register` gives a connection (the plugin's `prepare_connection`: every connection to a
served gputalks index):

- every word is quoted, so no query is an FTS5 syntax error;
- a run of words that is a topic alias ("matrix multiplication", "matmul", "TMA") also
  matches the talks of its topic (`topic_aliases`, written by each build from topics.toml);
- a word the index's vocabulary does not hold (`search_words`: words of titles, topics,
  speakers, series and events, written by each build) also matches its closest known
  spelling (rapidfuzz), so "thunderkitens" finds ThunderKittens.
"""

from __future__ import annotations

import sqlite3
from dataclasses import dataclass, field
from functools import lru_cache

from rapidfuzz import fuzz, process

from gputalks.search.words import tokens as words_of  # the words the topics' aliases are matched by

# The longest query answered: a reader's question fits; a pasted page is refused with the limit.
MAX_QUERY_WORDS, MAX_QUERY_BYTES = 32, 512


def too_long(query: str) -> str | None:
    """Why a query is refused (it says the limit), or None."""
    if len(query.encode()) > MAX_QUERY_BYTES or len(words_of(query)) > MAX_QUERY_WORDS:
        return f"This search is too long: at most {MAX_QUERY_WORDS} words and {MAX_QUERY_BYTES} bytes; keep the words that matter"
    return None


# Modes of gputalks_search(q, mode): which talks an expression matches.
TITLE, EVERY, ANY = "title", "every", "any"
NOTHING = '""'  # an FTS5 phrase no document contains
SPELLING_CUTOFF = 80  # rapidfuzz ratio of a misspelt word to a known one
SHORTEST_CORRECTED = 4  # shorter words are taken as typed ("cub", "tma")


@dataclass(frozen=True)
class SearchVocabulary:
    words: frozenset[str] = frozenset()
    aliases: dict[tuple[str, ...], tuple[str, ...]] = field(default_factory=dict)  # alias words -> topics

    @property
    def longest_alias(self) -> int:
        return max(map(len, self.aliases), default=0)


@dataclass(frozen=True)
class Unit:
    """A word of the query, or a run of words naming topics, with what else it may match."""

    words: tuple[str, ...]
    spelling: str | None = None
    topics: tuple[str, ...] = ()


def quoted(word: str) -> str:
    return '"' + word.replace('"', '""') + '"'


def phrase_query(query: str) -> str:
    """The query's whitespace-separated terms, each quoted, all required (FTS5); a phrase nothing
    matches when there is none, so no query is an FTS5 syntax error or an empty MATCH."""
    return " ".join(map(quoted, query.split())) or NOTHING


def load_vocabulary(conn: sqlite3.Connection) -> SearchVocabulary:
    """The index's search vocabulary; empty for an index built before it existed."""
    try:
        words = frozenset(word for (word,) in conn.execute("select word from search_words"))
        aliases: dict[tuple[str, ...], tuple[str, ...]] = {}
        for alias, topic in conn.execute("select alias, topic from topic_aliases order by topic"):
            key = tuple(words_of(alias))
            if key:
                aliases[key] = (*aliases.get(key, ()), topic)
    except sqlite3.OperationalError:
        return SearchVocabulary()
    return SearchVocabulary(words, aliases)


def units(query: str, vocabulary: SearchVocabulary) -> list[Unit]:
    """The query's words (the first MAX_QUERY_WORDS: a query's work is bounded wherever it comes
    from), longest topic aliases first, each with its closest known spelling."""
    words = words_of(query)[:MAX_QUERY_WORDS]
    found, position = [], 0
    while position < len(words):
        for size in range(min(vocabulary.longest_alias, len(words) - position), 0, -1):
            span = tuple(words[position:position + size])
            if span in vocabulary.aliases:
                found.append(Unit(span, spelling(span[0], vocabulary) if size == 1 else None,
                                  vocabulary.aliases[span]))
                position += size
                break
        else:
            word = words[position]
            found.append(Unit((word,), spelling(word, vocabulary)))
            position += 1
    return found


def spelling(word: str, vocabulary: SearchVocabulary) -> str | None:
    """The known word closest to one the vocabulary does not hold, if one is close enough."""
    if word in vocabulary.words or len(word) < SHORTEST_CORRECTED or word.isdigit() or not vocabulary.words:
        return None
    return _closest(word, vocabulary.words)


@lru_cache(maxsize=4096)
def _closest(word: str, words: frozenset[str]) -> str | None:
    best = process.extractOne(word, words, scorer=fuzz.ratio, score_cutoff=SPELLING_CUTOFF)
    return best[0] if best else None


def unit_expression(unit: Unit, in_title: bool) -> str:
    """FTS5 for one unit: its words (or their spelling), or, anywhere but the title tier, its
    topics' names among the talk's labels."""
    choices = [" AND ".join(map(quoted, unit.words))]
    if unit.spelling:
        choices.append(quoted(unit.spelling))
    if not in_title:
        choices += ["{search_labels} : " + quoted(" ".join(words_of(topic))) for topic in unit.topics]
    return choices[0] if len(choices) == 1 else "(" + " OR ".join(f"({c})" for c in choices) + ")"


def expression(query: str, mode: str, vocabulary: SearchVocabulary) -> str:
    """The FTS5 expression of `query` for one tier of the ranking."""
    found = units(query or "", vocabulary)
    if not found:
        return NOTHING
    parts = [unit_expression(unit, mode == TITLE) for unit in found]
    if mode == TITLE:
        return "{title search_terms} : (" + " AND ".join(parts) + ")"
    return (" OR " if mode == ANY else " AND ").join(parts)


# A vocabulary per database file and version: a served file never changes while served.
_VOCABULARIES: dict[tuple, SearchVocabulary] = {}


def register(conn: sqlite3.Connection, key: tuple | None = None) -> None:
    """Give `conn` the SQL functions `gputalks_search(q, mode)` (the ranked tiers) and
    `gputalks_fts(q)` (the words of moments inside talks); the vocabulary is read once per
    `key` (the served file's identity), or from `conn` itself when there is no key."""
    if key is None or key not in _VOCABULARIES:
        vocabulary = load_vocabulary(conn)
        if key is not None:
            if len(_VOCABULARIES) >= 8:
                _VOCABULARIES.clear()
            _VOCABULARIES[key] = vocabulary
    else:
        vocabulary = _VOCABULARIES[key]
    conn.create_function("gputalks_search", 2, lambda q, mode: expression(q or "", mode, vocabulary),
                         deterministic=True)
    conn.create_function("gputalks_fts", 1, lambda q: phrase_query(q or ""), deterministic=True)
