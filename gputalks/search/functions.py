"""The SQL functions a connection's searches call (`register`): the tiers' FTS5 expressions
(search/query.py), whether the query knows all its words, what of it a talk holds (`held`), the
phrase of moments inside talks; over the vocabulary of the file served, read once."""

from __future__ import annotations

import sqlite3
import threading
from dataclasses import dataclass
from functools import lru_cache

from gputalks.search.query import Unit, as_typed, expression, knows_all, phrase_query, units
from gputalks.search.vocabulary import SearchVocabulary, indexed_form, load_vocabulary
from gputalks.search.words import holds_run, tokens as words_of


def topic_words(unit: Unit, vocabulary: SearchVocabulary) -> tuple[tuple[str, ...], ...]:
    """The topics a unit names, its own and its concept's, as the indexed words of their names."""
    topics = dict.fromkeys((*unit.topics, *vocabulary.concept_topics.get(unit.concept or "", ())))
    return tuple(tuple(map(indexed_form, words_of(topic))) for topic in topics)


@dataclass(frozen=True)
class Wanted:
    """A unit of the query as a talk holds it: its forms (`as_typed`), the topics it names (its
    own or its concept's, as indexed words), and whether most talks hold it."""

    forms: tuple[tuple[str, ...], ...]
    topics: tuple[tuple[str, ...], ...] = ()
    common: bool = False  # held by more than half the talks: bm25 gives it no weight, nor does `held`
    rare: bool = False  # held by few talks: a talk holds it in its folder's file names too (`matched`)


def held(wanted: tuple[Wanted, ...], texts: tuple[str | None, ...]) -> str:
    """What of the query the texts of a talk (the last two its folder's file names, as `matched`
    counts them, and its labels) hold: how many units, as
    typed or, for a unit naming topics, by one of them among its labels (not counting those most
    talks hold: `SearchVocabulary.common`), then, when two units or more name topics, which of
    those it holds ("2 0 3"). Talks holding as many units are taken in turn by the topics they
    hold, so a reader naming two things that no talk holds together sees both ("cutlass and
    triton": a CUTLASS talk, a Triton talk, ...; "how do I use multiple gpus in pytorch": a
    multi-GPU talk, a PyTorch talk, where the PyTorch talks came first, holding "pytorch" as typed)."""
    indexed = [tuple(map(indexed_form, words_of(text))) if text else () for text in texts]  # each text once
    own, files = set().union(*indexed[:-2], indexed[-1]), set(indexed[-2])
    holds = [any(all(form in own or (unit.rare and form in files) for form in choice) for choice in unit.forms)
             or any(holds_run(indexed[-1], name) for name in unit.topics) for unit in wanted]
    counted = [holding and not unit.common for holding, unit in zip(holds, wanted)]
    topical = [n for n, unit in enumerate(wanted) if unit.topics]
    if len(topical) < 2:
        return str(sum(counted))
    topics = [n for n in topical if holds[n]]
    return " ".join([str(sum(counted)), *map(str, topics)])


# A vocabulary per database file and version: a served file never changes while served.
_VOCABULARIES: dict[tuple, SearchVocabulary] = {}
# One thread reads a file's vocabulary, the others wait for it: a worker's first requests come
# together, and each reading it (0.55 s at 100,000 talks) kept them all waiting the longer.
_READING = threading.Lock()


def vocabulary_for(conn: sqlite3.Connection, key: tuple | None) -> SearchVocabulary:
    """The vocabulary of the file `key` names, read once, through `conn`; with no key, read from
    `conn` each time (a file that may change)."""
    if key is None:
        return load_vocabulary(conn)
    vocabulary = _VOCABULARIES.get(key)  # one read: threads share the dict
    if vocabulary is None:
        with _READING:
            vocabulary = _VOCABULARIES.get(key)
            if vocabulary is None:
                vocabulary = load_vocabulary(conn)
                if len(_VOCABULARIES) >= 8:
                    _VOCABULARIES.clear()
                _VOCABULARIES[key] = vocabulary
    return vocabulary


def register(conn: sqlite3.Connection, key: tuple | None = None) -> None:
    """Give `conn` the SQL functions `gputalks_search(q, tier)` (the ranked tiers),
    `gputalks_knows_all(q)` (whether some talk holds each word naming nothing: `knows_all`),
    `gputalks_held(q, text...)` (what of the words a talk holds as typed: `held`) and
    `gputalks_fts(q)` (the words of moments inside talks), over the vocabulary of the file `key`
    names (`vocabulary_for`)."""
    vocabulary = vocabulary_for(conn, key)

    @lru_cache(maxsize=64)  # a search asks for each tier's expression, and the talks' holdings, of one query
    def parsed(query: str) -> tuple[Unit, ...]:
        return tuple(units(query, vocabulary))

    @lru_cache(maxsize=64)
    def wanted(query: str) -> tuple[Wanted, ...]:
        return tuple(Wanted(forms, topic_words(unit, vocabulary), vocabulary.common(forms), vocabulary.rare(forms))
                     for unit in parsed(query) if not unit.stop for forms in [as_typed(unit)])

    conn.create_function("gputalks_search", 2,
                         lambda q, tier: expression(q or "", tier, vocabulary, parsed(q or "")), deterministic=True)
    conn.create_function("gputalks_fts", 1, lambda q: phrase_query(q or ""), deterministic=True)
    conn.create_function("gputalks_knows_all", 1, lambda q: knows_all(parsed(q or ""), vocabulary),
                         deterministic=True)

    conn.create_function("gputalks_held", -1, lambda q, *texts: held(wanted(q or ""), texts), deterministic=True)
