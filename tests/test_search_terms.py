"""A concept's terms in the "related topic" tier (search/query.py `fewest_terms`): the same talks
as every term of topics.toml finds, with no talk's word counted twice in its score."""

from __future__ import annotations

import asyncio
import sqlite3

from gputalks.search.query import quoted
from gputalks.search.vocabulary import fewest_terms, load_vocabulary
from gputalks.site.serve import served_datasette


def test_terms_with_one_stem_or_holding_another_term_are_left_out(snapshot_db_path):
    with sqlite3.connect(snapshot_db_path) as conn:
        terms = load_vocabulary(conn).terms
    profiling = [" ".join(term) for term in fewest_terms(terms["profiling and bottlenecks"])]
    assert len({"profile", "profiling", "profiler"} & set(profiling)) == 1, profiling
    assert "nsight" in profiling and "nsight compute" not in profiling and "nsight systems" not in profiling
    memory = [" ".join(term) for term in fewest_terms(terms["memory"])]
    assert "memory" in memory and "shared memory" not in memory and "coalescing" in memory


def test_the_fewest_terms_find_the_same_talks_as_all_of_them(snapshot_db_path):
    with sqlite3.connect(snapshot_db_path) as conn:
        terms = load_vocabulary(conn).terms

        def matching(expression: str) -> set[int]:
            return {rowid for (rowid,) in conn.execute("select rowid from talks_fts where talks_fts match ?",
                                                      [expression])}

        for concept, listed in terms.items():
            every = matching(" OR ".join(quoted(term) for term in listed))
            fewest = matching(" OR ".join(quoted(" ".join(term)) for term in fewest_terms(listed)))
            assert every == fewest and every, concept


def test_a_word_held_by_several_of_a_concepts_terms_counts_once(snapshot_db_path):
    """"mécanisme d'attention" names the attention concept. "A learning journey CUDA, Triton, Flash
    Attention" holds its word "attention" through two terms ("attention", "flash attention"); "Flash
    Infer" holds one ("flashinfer"): counted once a word, Flash Infer is no longer below it."""
    ds = served_datasette(snapshot_db_path)

    async def titles() -> list[str]:
        response = await ds.client.get("/search.json", params={"q": "mécanisme d'attention"})
        return [result["title"] for result in response.json()["results"]]

    found = asyncio.run(titles())
    assert set(found[:2]) == {"Flash Attention", "How FlashAttention 4 Works"}, found[:10]
    assert found.index("Flash Infer") < found.index("A learning journey CUDA, Triton, Flash Attention"), found[:10]


def test_a_way_of_writing_the_index_holds_as_another_counts_once(snapshot_db_path):
    """"noyaux" is written "kernel", "kernels", "noyau" too (topics.toml `same`), and its concept's
    term is "kernel": the index holds "kernel" and "kernels" as one word, which the expression named
    three times, so bm25 counted a kernel talk's "kernel" thrice against Triton's "triton" once."""
    from gputalks.search.query import SOME, expression

    with sqlite3.connect(snapshot_db_path) as conn:
        vocabulary = load_vocabulary(conn)
        some = expression("noyaux triton", SOME, vocabulary)
        assert some.count('"kernel') == 1 and '"noyau"' in some, some
        quantification = expression("quantification", SOME, vocabulary).replace('"quantization and low', "")
        assert quantification.count('"quantiz') == 1, quantification  # not "quantized" beside it
        found = [row[0] for row in conn.execute(
            "select rowid from talks_fts where talks_fts match ?", [expression("noyaux", SOME, vocabulary)])]
        # "kernel", in 24 talks' text, is found in their own text alone (search/query.py `matched`)
        assert len(found) == conn.execute("select count(*) from talks_fts where talks_fts match '-{folder_words} : kernel'"
                                          ).fetchone()[0]


def test_a_named_phrases_words_alone_order_its_topics_talks(snapshot_db_path):
    """"memory bandwidth" names the topic "Memory and architecture" and no talk says it: of the
    topic's talks, those saying "memory" come first ("bande passante mémoire" too), where the
    shortest rows came first ("Tensor Cores"); a word that is the concept's term counts once
    ("architecture des gpu": "A New Architecture for Long Context" is no GPU architecture talk)."""
    ds = served_datasette(snapshot_db_path)

    async def first(query: str, count: int) -> list[tuple[str, int]]:
        response = await ds.client.get("/search.json", params={"q": query})
        return [(result["title"], result["tier"]) for result in response.json()["results"][:count]]

    for query in ("memory bandwidth", "bande passante mémoire"):
        found = asyncio.run(first(query, 2))
        assert all(tier == 3 and "Memory" in title for title, tier in found), (query, found)
    titles = [title for title, _ in asyncio.run(first("architecture des gpu", 5))]
    assert not any("Long Context" in title for title in titles), titles
