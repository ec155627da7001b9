"""What the reader's search knows of a served index, read once per file version: the words it
corrects a misspelling to, every word its talks, chapters and transcripts hold (a word found
there is never "corrected"), the topics' aliases, the concepts a reader's phrases name (in
English and French), and the words to ignore (English and French stop words from the
`stop-words` lists, and the index's own: "talk", "lecture", "vidéo"...), and the words a reader
may write for the index's own (a speaker's given name, a British spelling)."""

from __future__ import annotations

import json
import sqlite3
import threading
import unicodedata
from dataclasses import dataclass, field
from functools import cached_property, lru_cache

import snowballstemmer
from breame.data.spelling_constants import BRITISH_ENGLISH_SPELLINGS
from nicknames import NickNamer
from simplemma.strategies.dictionaries import DefaultDictionaryFactory
from stop_words import get_stop_words

from gputalks.search.words import holds_run, tokens

STOP_WORDS = frozenset(get_stop_words("en")) | frozenset(get_stop_words("fr"))
# The FTS tables whose words count as known, and their fts5vocab views (temp: the file stays read-only).
KNOWN_FROM = {"talks_fts": "gputalks_talk_terms", "chapters_fts": "gputalks_chapter_terms",
              "segments_fts": "gputalks_segment_terms"}
# A Snowball stemmer keeps the word it works on in the object: one per thread (Datasette runs
# queries, and prepares connections, on a pool of threads).
_STEMMERS = threading.local()


def _stemmer(language: str):
    found = getattr(_STEMMERS, language, None)
    if found is None:
        found = snowballstemmer.stemmer(language)
        setattr(_STEMMERS, language, found)
    return found


def _plain(word: str) -> str:
    """The word in lower case, its diacritics removed (as unicode61 indexes it; readers often omit them)."""
    return "".join(c for c in unicodedata.normalize("NFKD", word) if not unicodedata.combining(c)).lower()


@lru_cache(maxsize=65536)
def indexed_form(word: str) -> str:
    """A word as the index holds it: diacritics removed (unicode61), then Porter's stem (the FTS
    tokenizer's own)."""
    return _stemmer("porter").stemWord(_plain(word))


@lru_cache(maxsize=65536)
def french_stem(word: str) -> str:
    return _stemmer("french").stemWord(_plain(word))


def french_key(words: tuple[str, ...], lemmas: dict[str, str]) -> tuple[str, ...]:
    """A run of words as French phrases are compared: each by its lemma ("fonctionnent",
    "fonctionne": fonctionner), stemmed, the stop words inside it left out ("multiplication de
    matrices"), those at its ends kept ("entre gpu" is not "gpu")."""
    last = len(words) - 1
    return tuple(french_stem(lemmas.get(w, w)) for n, w in enumerate(words) if n in (0, last) or w not in STOP_WORDS)


RARE = 20  # `SearchVocabulary.rare`: held by at most one talk in this many


@dataclass(frozen=True)
class SearchVocabulary:
    words: tuple[str, ...] = ()  # what a misspelt word is corrected to (titles, speakers, series, events, topics, aliases)
    known: frozenset[str] = frozenset()  # every indexed term (`indexed_form`): such a word is never corrected
    aliases: dict[tuple[str, ...], tuple[str, ...]] = field(default_factory=dict)  # alias words -> topics
    phrases: dict[tuple[str, ...], str] = field(default_factory=dict)  # a reader's English words' stems -> concept
    phrases_fr: dict[tuple[str, ...], str] = field(default_factory=dict)  # `french_key` -> concept
    terms: dict[str, tuple[str, ...]] = field(default_factory=dict)  # concept -> the talks' terms for it
    concept_topics: dict[str, tuple[str, ...]] = field(default_factory=dict)  # concept -> topics it names
    ignored: frozenset[str] = STOP_WORDS
    same: dict[tuple[str, ...], tuple[tuple[str, ...], ...]] = field(default_factory=dict)  # `french_key` -> every way of writing it
    talks_holding: dict[str, int] = field(default_factory=dict)  # indexed term -> how many talks hold it
    # The most words of an alias or a phrase as typed (a French key may have fewer: "bande passante
    # de la mémoire" is 5 words, its key 3), so the query's runs are tried that long.
    longest: int = 0
    talks: int = 0  # how many talks the index holds
    # a word -> the index's words it may be written for: the speakers' given names ("ben":
    # benjamin), an American spelling ("optimisation": optimization)
    variants: dict[str, tuple[str, ...]] = field(default_factory=dict)
    # a French word as written -> its lemma, for the lemmas of the French phrases and ways of
    # writing: "communiquent" -> "communiquer" (`french_lemmas`, written by the build)
    lemmas: dict[str, str] = field(default_factory=dict)
    broad: frozenset[str] = frozenset()  # concepts and topics a sixth of the talks or more are about

    @cached_property
    def _word_set(self) -> frozenset[str]:  # `words` is a tuple (rapidfuzz reads it): not searched in turn
        return frozenset(self.words)

    def is_known(self, word: str) -> bool:
        return word in self._word_set or indexed_form(word) in self.known

    @cached_property
    def broad_words(self) -> frozenset[tuple[str, ...]]:
        """The words (`indexed_form`) of the broad concepts' terms and of the aliases naming only
        broad topics: "kernel", "course", "cuda" are as broad as what they name."""
        terms = [term for concept in self.broad for term in fewest_terms(self.terms.get(concept, ()))]
        aliases = [words for words, topics in self.aliases.items() if set(topics) <= self.broad]
        return frozenset(tuple(map(indexed_form, words)) for words in terms + aliases)

    def held_by_none(self, forms: tuple[tuple[str, ...], ...]) -> bool:
        """Whether no talk holds a unit (each of its `forms` has a word no talk holds)."""
        return self.talks > 0 and all(any(self.talks_holding.get(form, 0) == 0 for form in choice)
                                      for choice in forms if choice)

    def rare(self, forms: tuple[tuple[str, ...], ...]) -> bool:
        """Whether few talks hold a unit (all its `forms` together: at most one in RARE): only such a
        word tells what a lecture's folder holds ("coalesce.cu"); "model_train.py" is no talk on
        training. With no counts (no index), every word is."""
        return self.talks == 0 or sum(min(self.talks_holding.get(form, 0) for form in choice)
                                      for choice in forms if choice) * RARE <= self.talks

    def common(self, forms: tuple[tuple[str, ...], ...]) -> bool:
        """Whether more than half the talks hold a unit (one of its `forms` does: indexed words, all
        required): FTS5's bm25 gives such a word no weight ("gpu" in an index of GPU talks)."""
        return self.talks > 0 and any(min(self.talks_holding.get(form, 0) for form in choice) * 2 > self.talks
                                      for choice in forms if choice)


def load_vocabulary(conn: sqlite3.Connection) -> SearchVocabulary:
    """The index's search vocabulary; what an index built before a part of it lacks, empty."""
    def rows(sql: str) -> list[tuple]:
        try:
            return conn.execute(sql).fetchall()
        except sqlite3.OperationalError:
            return []

    aliases: dict[tuple[str, ...], tuple[str, ...]] = {}
    for alias, topic in rows("select alias, topic from topic_aliases order by topic"):
        if key := tuple(tokens(alias)):
            aliases[key] = (*aliases.get(key, ()), topic)
    phrases, phrases_fr, terms, topics, ignored, kept, broad = {}, {}, {}, {}, set(STOP_WORDS), set(), set()
    ways: dict[str, tuple[tuple[str, ...], ...]] = {}
    longest = max(map(len, aliases), default=0)
    concepts = rows("select concept, kind, text from search_concepts order by concept, kind, text")
    lemmas = {text: concept for concept, kind, text in concepts if kind == "lemma"}  # French phrases are keyed by them
    for concept, kind, text in concepts:
        words = tuple(tokens(text))
        if kind in ("en", "fr", "same"):
            longest = max(longest, len(words))
        if kind == "term":
            terms[concept] = (*terms.get(concept, ()), text)
        elif kind == "topic":
            topics[concept] = (*topics.get(concept, ()), text)
        elif kind == "en" and words:
            phrases.setdefault(tuple(map(indexed_form, words)), concept)
        elif kind == "fr" and words:
            phrases_fr.setdefault(french_key(words, lemmas), concept)
        elif kind == "ignore":
            ignored.update(words)
        elif kind == "keep":
            kept.update(words)
        elif kind == "same" and words:
            ways[concept] = (*ways.get(concept, ()), words)
        elif kind == "broad":
            broad.add(concept)
    for stems, concept in named_by_terms(terms).items():  # a reader's phrase listed first wins
        phrases.setdefault(stems, concept)
        longest = max(longest, len(stems))
    same: dict[tuple[str, ...], tuple[tuple[str, ...], ...]] = {}
    for forms in ways.values():
        for form in forms:
            same.setdefault(french_key(form, lemmas), forms)
    known, talks_holding = _known_terms(conn)
    # The aliases' words the talks hold are corrected to too: "flashinfr" is "flashinfer", a word
    # of no title ("Flash Infer") but of the talk's compound words.
    alias_words = {word for key in aliases for word in key if len(word) > 2 and not word.isdigit()
                   and indexed_form(word) in talks_holding}
    return SearchVocabulary(tuple(sorted({word for (word,) in rows("select word from search_words")} | alias_words)),
                            known, aliases, phrases, phrases_fr, terms, topics, frozenset(ignored - kept), same=same,
                            talks_holding=talks_holding, longest=longest,
                            talks=next(iter(rows("select count(*) from talks")), (0,))[0],
                            variants={**american_spellings(known),
                                      **given_names(name for (name,) in rows("select name from speakers"))},
                            lemmas=lemmas, broad=frozenset(broad))


def named_by_terms(terms: dict[str, tuple[str, ...]]) -> dict[tuple[str, ...], str]:
    """A concept's terms of two words or more that a reader types name it, as its phrases do
    (by their stems): "memory bandwidth", "bank conflicts", "cuda graphs", "tensor cores"; not a
    term of two concepts ("how gpu computing works": getting started, GPU architecture), nor a
    word alone ("performance", "kernel": a term is what the talks say, and a reader's single
    word says too little)."""
    concepts: dict[tuple[str, ...], set[str]] = {}
    for concept, texts in terms.items():
        for text in texts:
            if len(words := tokens(text)) > 1:
                concepts.setdefault(tuple(map(indexed_form, words)), set()).add(concept)
    return {stems: named.pop() for stems, named in concepts.items() if len(named) == 1}


@lru_cache(maxsize=1)
def _nicknames() -> NickNamer:
    return NickNamer()


def given_names(speakers) -> dict[str, tuple[str, ...]]:
    """The given names a reader may type for the speakers' (the `nicknames` package's English
    names and nicknames, both ways): "ben" -> ("benjamin",) when a speaker is Benjamin, and
    "jeffrey" -> ("jeff",) when one is Jeff; only the speakers' own names, so no other word of a
    query is taken for a name."""
    firsts = {words[0] for name in speakers if name and (words := tokens(name))}
    given: dict[str, tuple[str, ...]] = {}
    for first in sorted(firsts):
        for other in sorted(_nicknames().nicknames_of(first) | _nicknames().canonicals_of(first)):
            if other != first:
                given[other] = (*given.get(other, ()), first)
    return given


@lru_cache(maxsize=4)
def french_lemmas(words: frozenset[str]) -> dict[str, str]:
    """The French words (the `simplemma` package's dictionary) sharing a lemma with one of
    `words`, each to its lemma, so a phrase is named however its verbs are conjugated, in the
    phrase or in the query: "comment les gpu communiquent" names "communiquer" (Snowball's
    stemmer leaves "communiquent" whole), "comment fonctionnent les gpu" names "comment
    fonctionne un gpu". The static site's search takes the same words for the same lemmas."""
    dictionary = DefaultDictionaryFactory(cache_max_size=0).get_dictionary("fr")
    # Not by a stop word's lemma ("ai", "a": avoir): "a" is no other way of writing "AI".
    wanted = words | {lemma for word in words if (lemma := dictionary.get(word)) and lemma not in STOP_WORDS}
    return {form: lemma for form, lemma in dictionary.items()
            if lemma in wanted and form != lemma and form not in STOP_WORDS}


def american_spellings(known: frozenset[str]) -> dict[str, tuple[str, ...]]:
    """The British spellings (the `breame` package's) of the words the index holds in American
    spelling, where the stems differ: "optimisation" -> ("optimization",), as French readers write
    it too; "colour" only if a talk says "color"."""
    found = {}
    for british, american in BRITISH_ENGLISH_SPELLINGS.items():
        if " " not in american and (stem := indexed_form(american)) in known and stem != indexed_form(british):
            found[british] = (american,)
    return found


def _known_terms(conn: sqlite3.Connection) -> tuple[frozenset[str], dict[str, int]]:
    """Every term of the talks', chapters' and transcripts' full-text indexes (their fts5vocab),
    and how many talks hold each term of the talks' own."""
    known: set[str] = set()
    talks_holding: dict[str, int] = {}
    for table, view in KNOWN_FROM.items():
        try:
            conn.execute(f"create virtual table if not exists temp.{view} using fts5vocab(main, '{table}', 'row')")
            counted = dict(conn.execute(f"select term, doc from temp.{view}"))
        except sqlite3.Error:  # an index without that table
            continue
        known.update(counted)
        if table == "talks_fts":
            talks_holding = counted
    return frozenset(known), talks_holding


@lru_cache(maxsize=1024)
def fewest_terms(terms: tuple[str, ...]) -> tuple[tuple[str, ...], ...]:
    """A concept's terms (as words) that find the same talks with no word counted twice in a talk's
    score: the first listed of those with the same stems ("profile", "profiling"), and none holding
    another's words ("nsight compute" holds "nsight")."""
    by_stems: dict[tuple[str, ...], tuple[str, ...]] = {}
    for term in terms:
        words = tuple(tokens(term))
        by_stems.setdefault(tuple(map(indexed_form, words)), words)
    return tuple(words for stems, words in by_stems.items()
                 if not any(len(other) < len(stems) and holds_run(stems, other) for other in by_stems))


def _ranked_columns(conn: sqlite3.Connection) -> dict:
    """What bm25 knows of the talks' ranked columns (search/talks.sql): how many talks, their
    average length in words (all columns), and how many talks each topic has, for the static
    search's bm25 (site/templates/bm25.js)."""
    talks = words = 0
    topic_talks: dict[str, int] = {}
    for *row, topics in conn.execute("select title, search_terms, description, speaker_names, search_labels, folder_words, "
                                     "topics from talks"):
        talks += 1
        words += sum(len(tokens(text)) for text in row if text)
        for topic in json.loads(topics or "[]"):
            topic_talks[topic] = topic_talks.get(topic, 0) + 1
    return {"talks": talks, "average_length": round(words / talks, 3) if talks else 1.0, "topic_talks": topic_talks}


def browser_vocabulary(conn: sqlite3.Connection) -> dict:
    """What the static site's search (site/templates/search.js) knows, as JSON: the same stop
    words, aliases, concepts (their terms as the served search widens them) and correction
    targets as the served search, and what its bm25 knows of the talks (`_ranked_columns`)."""
    vocabulary = load_vocabulary(conn)
    aliases: dict[str, list[str]] = {}
    for words, topics in vocabulary.aliases.items():
        aliases[" ".join(words)] = list(topics)
    fr = {}
    try:
        fr = {text: concept for concept, text in conn.execute(
            "select concept, text from search_concepts where kind = 'fr' order by concept, text")}
    except sqlite3.OperationalError:
        pass
    return {"stop": sorted(vocabulary.ignored), "words": list(vocabulary.words), "aliases": aliases,
            "phrases": {" ".join(stems): concept for stems, concept in vocabulary.phrases.items()},  # by stems
            "phrases_fr": fr,
            "terms": {concept: [" ".join(term) for term in fewest_terms(terms)]
                      for concept, terms in vocabulary.terms.items()},
            **_ranked_columns(conn),
            "concept_topics": {c: list(t) for c, t in vocabulary.concept_topics.items()},
            "variants": {word: list(names) for word, names in vocabulary.variants.items()},
            "lemmas": vocabulary.lemmas,
            "broad": sorted(vocabulary.broad),
            "rare": RARE,  # a phrase held by at most one page in this many counts in the folder's file names
            # the indexed words more than half the talks hold (`SearchVocabulary.common`)
            "common": sorted(word for word, talks in vocabulary.talks_holding.items() if talks * 2 > vocabulary.talks),
            "same": sorted({tuple(" ".join(form) for form in forms) for forms in vocabulary.same.values()})}
