"""Ways of writing one thing (topics.toml `[search] same`): an abbreviation and its long form, a
French term and its English one, matched as the reader's own words, on the snapshot index."""

from __future__ import annotations

import asyncio
import re
import sqlite3
import tomllib

import pytest

from gputalks.project.resources import DEFAULT_TOPICS
from gputalks.project.validation import ConfigError, TopicsFile, validated
from gputalks.site.serve import served_datasette

ALL_YOUR_WORDS = {0, 1}  # search/ranking.py MATCHES


@pytest.fixture(scope="module")
def ds(snapshot_db_path):
    return served_datasette(snapshot_db_path)


@pytest.fixture(scope="module")
def titles(snapshot_db_path) -> dict[str, str]:
    with sqlite3.connect(snapshot_db_path) as conn:
        return dict(conn.execute("select id, title from talks where gone_since is null"))


def results(ds, query: str) -> list[dict]:
    async def inner():
        return await ds.client.get("/search.json", params={"q": query})
    response = asyncio.run(inner())
    assert response.status_code == 200, query
    return response.json()["results"]


def titled(titles: dict[str, str], pattern: str) -> set[str]:
    return {talk for talk, title in titles.items() if re.search(pattern, title, re.IGNORECASE)}


def test_the_long_form_finds_the_talks_titled_with_the_abbreviation_as_all_your_words(ds, titles):
    abbreviated = titled(titles, r"\bLLMs?\b")
    spelt_out = titled(titles, r"\blarge language models?\b")
    assert len(abbreviated) >= 4 and spelt_out  # the snapshot's real titles say both
    for query, expected in (("large language models", abbreviated), ("llm", spelt_out)):
        found = {r["id"] for r in results(ds, query) if r["tier"] in ALL_YOUR_WORDS}
        assert expected <= found, (query, expected - found)


def test_a_french_query_finds_the_english_title_first(ds, titles):
    first = results(ds, "langages dédiés")[:3]
    assert titled(titles, r"^Domain-Specific Languages") <= {r["id"] for r in first}
    assert all(r["match"] == "all your words" for r in first)
    assert results(ds, "mémoire partagée")[0]["title"].startswith("How to Understand and Optimize Shared Memory")


def test_the_french_for_the_titles_words_finds_their_talks_with_all_the_words(ds, titles):
    """The glossary's French for the words of the talks' titles, where the index would not hold
    it as the English: "vitesse de la lumière" (speed of light), "bibliothèque cuda" (library),
    "lois d'échelle" (scaling laws) each found nothing with all its words."""
    for query, pattern in (("vitesse de la lumière", r"speed.of.light"), ("bibliothèque cuda", r"cuda library"),
                           ("lois d'échelle", r"scaling laws")):
        found = {r["id"] for r in results(ds, query) if r["tier"] in ALL_YOUR_WORDS}
        assert titled(titles, pattern) <= found and found, (query, found)


def test_a_french_form_names_what_its_english_form_names(ds, snapshot_db_path):
    """No talk says "global memory" or "mémoire globale": the topic the English form is an alias
    of ("Memory and architecture"), and the memory concept it is a term of, still answer, as a
    related topic, rather than nothing: talks filed under that topic, or holding one of the
    concept's terms (topics.toml)."""
    found = results(ds, "mémoire globale")
    terms = next(c["terms"] for c in tomllib.loads(DEFAULT_TOPICS.read_text())["concepts"] if c["name"] == "memory")
    with sqlite3.connect(snapshot_db_path) as conn:
        memory = {talk for (talk,) in conn.execute(
            "select t.id from talks t, json_each(t.topics) j where j.value = 'Memory and architecture'")}
        memory |= {talk for (talk,) in conn.execute(
            "select t.id from talks_fts f join talks t on t.rowid = f.rowid where talks_fts match ?",
            [" OR ".join(f'"{term}"' for term in terms)])}
    assert len(found) >= 5 and {r["id"] for r in found[:5]} <= memory
    assert {r["match"] for r in found[:5]} == {"related topic"}


def test_a_way_of_writing_alone_is_a_one_line_error():
    with pytest.raises(ConfigError, match=r"^topics.toml: \[search\] same #1: List should have at least 2 items"):
        validated(TopicsFile, {"topics": [{"name": "x", "aliases": ["x"]}], "search": {"same": [["rl"]]}},
                  "topics.toml")


def test_a_misspelt_way_of_writing_finds_what_its_right_spelling_finds(ds, titles):
    """"tensor cors" is "tensor cores" to the French stemmer that keys the ways of writing, so it
    was taken for that phrase, but its English form was then dropped as the span's own: the
    index was asked for "cors", and nothing came back."""
    found = {r["id"] for r in results(ds, "tensor cors") if r["tier"] in ALL_YOUR_WORDS}
    assert titled(titles, r"tensor.cores?\b") <= found and found


def test_a_british_spelling_is_the_american_one_the_index_holds(snapshot_db_path):
    """A British spelling (the `breame` package's) is another way of writing the American word
    the talks hold: a word a transcript holds in British spelling is never "corrected", so
    "optimise" would find only that transcript, not the talks titled "Optimizing"."""
    from gputalks.search.vocabulary import american_spellings, indexed_form, load_vocabulary

    found = american_spellings(frozenset({indexed_form("optimization")}))  # "optim": optimize, optimizing...
    assert found["optimisation"] == ("optimization",) and found["optimising"] == ("optimizing",)
    assert "colour" not in found
    assert american_spellings(frozenset({indexed_form("color")}))["colour"] == ("color",)
    with sqlite3.connect(snapshot_db_path) as conn:
        variants = load_vocabulary(conn).variants
    assert variants["optimise"] == ("optimize",) and "colour" not in variants  # no talk says "color"


def test_a_french_question_answers_as_its_english_one(ds):
    """"noyau" is a way of writing "kernel", as "kernel" is a plain word in English: it was also a
    concept, which the "related topic" tier then required, so "pourquoi mon noyau est lent" left
    out the profiling talks that do not say "kernel" ("NVIDIA Profiling"), which "why is my kernel
    slow" finds. And "quoi" is no stop word of the French list: "c'est quoi flash attention"
    matched no talk with all its words."""
    def first(query: str) -> list[tuple[str, str]]:
        return [(r["id"], r["match"]) for r in results(ds, query)[:6]]

    assert first("pourquoi mon noyau est lent") == first("why is my kernel slow")
    assert "youtube-F_BazucyCMw" in [talk for talk, _ in first("pourquoi mon noyau est lent")]
    assert first("c'est quoi flash attention")[:3] == first("flash attention")[:3]
    assert {match for _, match in first("c'est quoi flash attention")[:3]} == {"all your words"}


def test_a_conjugated_french_verb_names_its_phrase(ds):
    """Snowball's French stemmer leaves "communiquent" whole, so "comment les gpu communiquent
    entre eux" named no phrase ("communiquer") and found nothing at all; by the verb's lemma (the
    `simplemma` dictionary's) it finds what "how do gpus talk to each other" finds."""
    french = [r["id"] for r in results(ds, "comment les gpu communiquent entre eux")[:5]]
    assert french and french == [r["id"] for r in results(ds, "how do gpus talk to each other")[:5]]


def test_a_phrase_conjugated_in_the_query_and_in_topics_toml_names_its_concept(ds):
    """"comment fonctionne un gpu" is a phrase of topics.toml, its verb conjugated: the lemmas were
    those of the phrase's words as written, so "comment fonctionnent les gpu" named nothing and
    found no talk at all. Both are keyed by the verb's lemma (fonctionner) now: the query finds
    the GPU architecture talks as "comment fonctionne un gpu" does."""
    conjugated = [r["id"] for r in results(ds, "comment fonctionnent les gpu")[:5]]
    assert conjugated and conjugated == [r["id"] for r in results(ds, "comment fonctionne un gpu")[:5]]
    assert {"gpumode-lecture-037", "gpumode-lecture-004"} <= set(conjugated)  # SASS & microarchitecture, Intro to ...


def test_a_readers_abbreviation_of_a_talks_name_finds_it(ds, titles):
    """"fa3" and "fa4" are how readers write FlashAttention 3 and 4: "fa3" found nothing."""
    for query, pattern in (("fa3", r"flash ?attention 3"), ("fa4", r"flash ?attention 4")):
        found = [r for r in results(ds, query) if r["tier"] in ALL_YOUR_WORDS]
        assert found and {r["id"] for r in found} == titled(titles, pattern), (query, found)
