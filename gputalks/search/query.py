"""A reader's words as FTS5 queries: the one ranking of talks, shared by `/search`,
`/search.json`, the `search_talks` canned query and `gputalks search`.

The ranking itself is SQL (`talks.sql` beside this file), in tiers, each by bm25 over title,
compound words, description, speakers and labels (series, event, year, topics):

- title: the title holds every word (the shortest title first);
- every: every word anywhere ("all your words");
- most: every word but one ("most of your words": "how do I write my first cuda kernel"
  finds "How to Write a CUDA Program");
- related: every concept or topic the query names, through the terms the talks use for it
  ("related topic": "talk to each other" finds NCCL, "multiplication de matrices" GEMM);
- some: any word, or any topic or concept named ("some of your words"), the talks holding more
  of the reader's own words first ("apprendre triton": a Triton talk before the courses that
  only match "apprendre" through its concept).

This module turns the words into the FTS5 expression of each tier, through the SQL function
`gputalks_search(q, tier)` that `register` (search/functions.py) gives a connection:

- every word is quoted, so no query is an FTS5 syntax error;
- a run of words that is a topic alias, or a reader's phrase for a concept (topics.toml,
  English by Porter's stems, or French after French stemming), is one unit: literal in the
  first tiers, widened to its topics and its concept's terms in "related"; so is a way of
  writing one thing (`[search] same`: "rl", "reinforcement learning"), whose other ways are
  literal too;
- stop words (English and French, and the index's own) count in no tier, unless the query has
  nothing else;
- past MOST_WORDS words, nothing is widened: the words are taken as typed, and "some of your
  words" asks for the rarest of them (SOME_POSTINGS);
- a word that no talk, chapter or transcript holds, and only such a word, also matches the
  closest word of titles, speakers, series and topics, within one edit (two from 8 letters;
  two letters swapped are one edit).
"""

from __future__ import annotations

import unicodedata
from dataclasses import dataclass
from functools import lru_cache

from rapidfuzz import fuzz, process
from rapidfuzz.distance import OSA

from gputalks.search.vocabulary import SearchVocabulary, fewest_terms, french_key, indexed_form
from gputalks.search.words import tokens as words_of

# The longest query answered: a reader's question fits; a pasted page is refused with the limit.
MAX_QUERY_WORDS, MAX_QUERY_BYTES = 32, 512
# The tiers of gputalks_search(q, tier); HIGHLIGHT: every word and term, for the excerpt.
TITLE, EVERY, MOST, RELATED, SOME, HIGHLIGHT = "title", "every", "most", "related", "some", "highlight"
MOST_WORDS = 8  # "every word but one" is asked of queries of 3 to this many words
# Past MOST_WORDS words, "some of your words" asks only for the rarest of them, as many as are held
# by about this many talks in all (at least one word): the work a reader's query asks is bounded
# (20 common words were in 70% of 100,000 talks, all ranked: p95 936 ms at 8 clients).
SOME_POSTINGS = 10_000
NOTHING = '""'  # an FTS5 phrase no document contains
# A talk's own text: every column of talks_fts but the file names of its folder (folder_words).
OWN_TEXT = "-{folder_words}"
SHORTEST_CORRECTED = 4  # shorter words are taken as typed ("cub", "tma")


def too_long(query: str) -> str | None:
    """Why a query is refused (it says the limit), or None."""
    if len(query.encode()) > MAX_QUERY_BYTES or len(words_of(query)) > MAX_QUERY_WORDS:
        return (f"This search is too long: at most {MAX_QUERY_WORDS} words and {MAX_QUERY_BYTES} bytes; "
                "keep the words that matter")
    return None


@dataclass(frozen=True)
class Unit:
    """A word of the query, or a run of words naming topics or a concept, with what else it matches."""

    words: tuple[str, ...]
    spelling: str | None = None
    topics: tuple[str, ...] = ()
    concept: str | None = None
    stop: bool = False
    same: tuple[tuple[str, ...], ...] = ()  # the other ways of writing it ("rl": reinforcement learning)


def quoted(word: str) -> str:
    return '"' + word.replace('"', '""') + '"'


def phrase_query(query: str) -> str:
    """The query's whitespace-separated terms, each quoted, all required (FTS5); a phrase nothing
    matches when there is none, so no query is an FTS5 syntax error or an empty MATCH."""
    return " ".join(map(quoted, query.split())) or NOTHING


def units(query: str, vocabulary: SearchVocabulary) -> list[Unit]:
    """The query's words (the first MAX_QUERY_WORDS: a query's work is bounded wherever it comes
    from), the longest runs naming a topic or a concept first; stop words marked, unless the
    query has nothing else."""
    # Compatibility forms as the plain letters they stand for (full-width "ｇｐｕ" is "gpu").
    words = words_of(unicodedata.normalize("NFKC", query))[:MAX_QUERY_WORDS]
    found, position = [], 0
    while position < len(words):
        for size in range(min(vocabulary.longest, len(words) - position), 0, -1):
            if unit := _named(tuple(words[position:position + size]), vocabulary):
                break
        else:
            word, size = words[position], 1
            unit = plain_word(word, vocabulary)
        found.append(unit)
        position += size
    if all(unit.stop for unit in found):
        found = [Unit(unit.words, spelling(unit.words[0], vocabulary)) for unit in found]
    return found


def plain_word(word: str, vocabulary: SearchVocabulary) -> Unit:
    """A word naming nothing: a stop word; or a word written as the index's own words too (a
    speaker's given name, "ben": Benjamin; an American spelling, "optimisation": optimization);
    or a word, its spelling corrected if no talk holds it."""
    if word in vocabulary.ignored:
        return Unit((word,), stop=True)
    if variants := vocabulary.variants.get(word):
        return Unit((word,), same=tuple((variant,) for variant in variants))
    return Unit((word,), spelling(word, vocabulary))


def _named(span: tuple[str, ...], vocabulary: SearchVocabulary) -> Unit | None:
    """The span as a topic alias, a concept's phrase or a way of writing one thing, or None; what
    another way of writing it names, it names too ("mémoire globale": the topic of "global memory").
    Every way of writing it but the span's own words is kept, those with the same stems too: the
    span may be misspelt ("tensor cors" is "tensor cores" to the stemmer, not to the index)."""
    key = french_key(span, vocabulary.lemmas)  # "communiquent": communiquer
    same = tuple(form for form in vocabulary.same.get(key, ()) if form != span)
    topics = tuple(dict.fromkeys(topic for form in (span, *same) for topic in vocabulary.aliases.get(form, ())))
    stems = (tuple(map(indexed_form, form)) for form in (span, *same))  # English phrases by their stems
    concept = next(filter(None, map(vocabulary.phrases.get, stems)), None)
    concept = concept or vocabulary.phrases_fr.get(key)
    if not topics and not concept and not same:
        return None
    return Unit(span, spelling(span[0], vocabulary) if len(span) == 1 else None, topics, concept, same=same)


def spelling(word: str, vocabulary: SearchVocabulary) -> str | None:
    """The closest known word to one no talk holds, within one edit (two from 8 letters)."""
    if len(word) < SHORTEST_CORRECTED or word.isdigit() or not vocabulary.words or vocabulary.is_known(word):
        return None
    return _closest(word, vocabulary.words, 2 if len(word) >= 8 else 1)


@lru_cache(maxsize=4096)
def _closest(word: str, words: tuple[str, ...], edits: int) -> str | None:
    """Of the words within `edits` (a swap of two letters is one), the fewest edits away, then the
    most alike ("cutlas": cutlass before cublas)."""
    near = process.extract(word, words, scorer=OSA.distance, score_cutoff=edits, limit=None)
    return min(near, key=lambda found: (found[1], -fuzz.ratio(word, found[0]), found[0]))[0] if near else None


def other_forms(unit: Unit) -> tuple[tuple[str, ...], ...]:
    """The unit's spelling and its other ways of writing, each as words, those the index holds as
    the unit's own words or as an earlier form left out ("noyaux": "kernel" and "noyau", not
    "kernels" too): bm25 counts each phrase of an expression, and would count such a word twice."""
    seen, found = {tuple(map(indexed_form, unit.words))}, []
    for form in ([(unit.spelling,)] if unit.spelling else []) + list(unit.same):
        if (stems := tuple(map(indexed_form, form))) not in seen:
            seen.add(stems)
            found.append(form)
    return tuple(found)


def literal(unit: Unit) -> str:
    """FTS5 for the unit's own words, or their spelling, or another way of writing them."""
    words = f"({' AND '.join(map(quoted, unit.words))})"
    others = [quoted(" ".join(form)) for form in other_forms(unit)]
    return f"({' OR '.join([words, *others])})" if others else words


def matched(unit: Unit, vocabulary: SearchVocabulary) -> str:
    """FTS5 for the unit as the tiers ask it: a word many talks hold ("train", "model") in the talk's
    own text, not in the file names of its folder (`SearchVocabulary.rare`)."""
    return where_told(literal(unit), as_typed(unit), vocabulary)


def where_told(phrase: str, forms: tuple[tuple[str, ...], ...], vocabulary: SearchVocabulary) -> str:
    """The FTS5 `phrase` (of the indexed `forms`) in every column if few talks hold it, else in the
    talk's own text (`matched`)."""
    return phrase if vocabulary.rare(forms) else f"{OWN_TEXT} : {phrase}"


def widened(unit: Unit, vocabulary: SearchVocabulary) -> str:
    """FTS5 for the unit, its topics' names among the talk's labels, and its concept's terms (those that
    count no word twice: `fewest_terms`, and none the unit's own forms hold)."""
    choices = [matched(unit, vocabulary)]
    topics = (*unit.topics, *vocabulary.concept_topics.get(unit.concept or "", ()))
    choices += ["{search_labels} : " + quoted(" ".join(words_of(topic))) for topic in dict.fromkeys(topics)]
    own = {tuple(map(indexed_form, form)) for form in (unit.words, *other_forms(unit))}
    for term in fewest_terms(vocabulary.terms.get(unit.concept or "", ())):
        if (stems := tuple(map(indexed_form, term))) not in own:
            choices.append(where_told(quoted(" ".join(term)), (stems,), vocabulary))
    return "(" + " OR ".join(choices) + ")"


def expression(query: str, tier: str, vocabulary: SearchVocabulary, parsed: tuple[Unit, ...] | None = None) -> str:
    """The FTS5 expression of `query` for one tier of the ranking (`parsed`: its `units`, when known)."""
    content = [unit for unit in (units(query or "", vocabulary) if parsed is None else parsed) if not unit.stop]
    if not content:
        return NOTHING
    if tier == TITLE:
        return "{title search_terms} : (" + " AND ".join(map(literal, content)) + ")"
    if tier == EVERY:
        return " AND ".join(matched(unit, vocabulary) for unit in content)
    if tier == MOST:  # of the words that tell talks apart: a word most talks hold says nothing of them
        telling = [unit for unit in content if not vocabulary.common(as_typed(unit))]
        if not 3 <= len(telling) <= MOST_WORDS:
            return NOTHING
        return " OR ".join("(" + " AND ".join(matched(unit, vocabulary) for unit in telling if unit is not left) + ")"
                           for left in telling)
    # Past MOST_WORDS words (a pasted sentence) the words are taken as typed: widening each one
    # would find every talk of a dozen topics and rank them all (0.8 s a query at 100,000 talks).
    named = narrowing(content, vocabulary) if len(content) <= MOST_WORDS else []
    if tier == RELATED:
        if not named:
            return NOTHING
        required = " AND ".join(widened(unit, vocabulary) for unit in named)
        if 3 <= len(named) <= MOST_WORDS:  # a question naming many things: all of them but one will do
            required = " OR ".join("(" + " AND ".join(widened(unit, vocabulary) for unit in named if unit is not left)
                                   + ")" for left in named)
        plain = [matched(unit, vocabulary) for unit in content if unit not in named]
        # The words of a named phrase, each alone: "memory bandwidth" names a topic, and of its talks
        # those saying "memory" are nearer it than those only filed under it.
        plain += phrase_words(named, vocabulary)
        # The other words matched nothing more, but bm25 counts them: talks holding them come first.
        return f"({required}) AND ({' OR '.join([*plain, required])})" if plain else required
    if tier in (SOME, HIGHLIGHT) and len(content) > MOST_WORDS:  # the excerpt too: its passage, of those words
        content = rarest(content, vocabulary)
    if tier == SOME:  # a talk holding only a word most talks hold ("sql on gpus": "gpu") holds none that tells
        content = [unit for unit in content if unit in named or not vocabulary.common(as_typed(unit))] or content
    if tier == SOME:
        return " OR ".join(widened(unit, vocabulary) if unit in named else matched(unit, vocabulary) for unit in content)
    if tier == HIGHLIGHT:
        return " OR ".join(widened(unit, vocabulary) if unit in named else literal(unit) for unit in content)
    return NOTHING


def phrase_words(named: list[Unit], vocabulary: SearchVocabulary) -> list[str]:
    """The words of the named units' phrases, each alone, for "related topic" to count: "memory
    bandwidth" names a topic, and of its talks those saying "memory" are nearer it than those only
    filed under it. Not stop words, words no talk or most talks hold, nor a word that is a term of
    the unit's concept (counted already: "architecture" in "architecture des gpu")."""
    found = []
    for unit in named:
        terms = {indexed_form(word) for term in vocabulary.terms.get(unit.concept or "", ()) for word in words_of(term)}
        found += [word for form in (unit.words, *unit.same) if len(form) > 1 for word in form
                  if word not in vocabulary.ignored and (stem := indexed_form(word)) not in terms
                  and not vocabulary.held_by_none(((stem,),)) and not vocabulary.common(((stem,),))]
    return [where_told(quoted(word), ((indexed_form(word),),), vocabulary) for word in dict.fromkeys(found)]


def narrowing(content: list[Unit], vocabulary: SearchVocabulary) -> list[Unit]:
    """The units naming topics or a concept that the talks must hold in "related topic": all of
    them, but a broad one (topics.toml `broad`: a sixth of the talks are about it) only when the
    query has no other word that tells talks apart: "how do I write kernels for intel gpus" is
    about Intel GPUs, not every talk on writing kernels (34 of 150), and finds the SYCL talk
    first; "where should I start learning cuda" names only broad things, and finds the courses.
    A word that is a broad thing's own term is as broad: "kernels" in "cuda kernels for beginners".
    A word no talk holds tells none apart: "warp shuffles" has the warp talks to show."""
    def broad(unit: Unit) -> bool:
        names = (*unit.topics, *((unit.concept,) if unit.concept else ()))
        if not names:
            return any(form in vocabulary.broad_words for form in as_typed(unit))
        return all(name in vocabulary.broad for name in names)

    named = [unit for unit in content if unit.topics or unit.concept]
    if any(not broad(unit) and not vocabulary.common(forms := as_typed(unit)) and not vocabulary.held_by_none(forms)
           for unit in content):
        return [unit for unit in named if not broad(unit)]
    return named


def rarest(content: list[Unit], vocabulary: SearchVocabulary) -> list[Unit]:
    """The rarest units, in the query's order, while the talks holding them stay within
    SOME_POSTINGS (at least one): the words that tell talks apart, not those in every other one."""
    def talks_holding(unit: Unit) -> int:
        return sum(min(vocabulary.talks_holding.get(form, 0) for form in choice) for choice in as_typed(unit))

    counted = sorted(((talks_holding(unit), n) for n, unit in enumerate(content)))
    kept, total = set(), 0
    for count, n in counted:
        if kept and total + count > SOME_POSTINGS:
            break
        kept.add(n)
        total += count
    return [unit for n, unit in enumerate(content) if n in kept]


def knows_all(units_: tuple[Unit, ...], vocabulary: SearchVocabulary) -> bool:
    """Whether some talk holds each word of the query that names nothing: else "related topic"
    is no answer to it, only talks holding some of its words ("kubernetes deployment": the
    inference talks, none of them on Kubernetes; "stable diffusion inference")."""
    return not any(not unit.stop and not (unit.topics or unit.concept) and vocabulary.held_by_none(as_typed(unit))
                   for unit in units_)


def as_typed(unit: Unit) -> tuple[tuple[str, ...], ...]:
    """The indexed forms a talk must hold to hold the unit as typed: its words, or its spelling."""
    return ((tuple(map(indexed_form, unit.words)),) + ((indexed_form(unit.spelling),) if unit.spelling else ())
            + tuple(tuple(map(indexed_form, form)) for form in unit.same))
