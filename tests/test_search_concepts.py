"""The reader's words for what the talks are about (topics.toml concepts, aliases and ways of
writing), found in the reader's query: "C++" is a word, a concept's own term names it, the
phrases the judged batches showed missing name their concepts."""

from __future__ import annotations

import sqlite3

from tests.test_search import search


def test_cpp_is_a_word_for_the_reader_and_the_index(ds, snapshot_db_path):
    """"C++" split into "c" (a French stop word) and nothing: "programmation parallèle en c++"
    searched for parallel programming alone, and "c++ parallel algorithms" found the scan talks.
    It is one word, "cpp", in the query and in the titles' compound words; "cuda c++" still names
    CUDA basics."""
    from gputalks.search.words import tokens, word_line

    assert tokens("CUDA C++ llm.cpp") == ["cuda", "cpp", "llm", "cpp"] and word_line("Cuda C++") == " cuda cpp "
    assert search(ds, "c++ parallel algorithms")[0] == "gtc-gtcspring22-s41960"  # C++ Standard Parallelism
    assert {"gtc-gtcspring22-s41960", "gpumode-bonus-cuda-c-llm-cpp"} <= set(search(ds, "c++")[:3])
    assert "gtc-gtcspring22-s41960" in search(ds, "programmation parallèle en c++")[:3]
    with sqlite3.connect(snapshot_db_path) as conn:
        topics = conn.execute("select topics from talks where id = 'gpumode-bonus-cuda-c-llm-cpp'").fetchone()[0]
    assert "CUDA basics" in topics


def test_a_concepts_own_term_of_two_words_names_it(ds, snapshot_db_path):
    """"bande passante mémoire" is "memory bandwidth", a topic alias and one of the memory
    concept's terms: it names the concept too, and its "related topic" holds the CUDA Performance
    Checklist (a folder of coalesce.cu and occupancy.cu), missing before. A term of two concepts
    ("how gpu computing works": getting started, GPU architecture) names neither."""
    from gputalks.search.query import units
    from gputalks.search.vocabulary import indexed_form, load_vocabulary, named_by_terms

    with sqlite3.connect(snapshot_db_path) as conn:
        vocabulary = load_vocabulary(conn)
    assert [u.concept for u in units("memory bandwidth", vocabulary)] == ["memory"]
    assert [u.concept for u in units("how do I use cuda graphs", vocabulary) if not u.stop] == ["launch overhead"]
    shared = tuple(map(indexed_form, ("how", "gpu", "computing", "works")))
    assert all("how gpu computing works" in vocabulary.terms[c] for c in ("getting started", "GPU architecture"))
    assert shared not in named_by_terms(vocabulary.terms) and ("memori", "bandwidth") in named_by_terms(vocabulary.terms)
    assert "gpumode-lecture-008" in search(ds, "bande passante mémoire")[:5]


def test_the_readers_phrases_of_the_latest_batches_name_their_concepts(ds):
    """Written from the tuned part of the seventeenth and eighteenth judged batches: "the right
    answer" is kernel correctness (only "wrong answer" was), "performance engineering" is making
    it faster (before, "engineering" found the ML and LLM Systems Engineering talks first)."""
    correctness = {"youtube-7XsSd9mqay4", "youtube-WRAQYXBA_Qc", "youtube-pB8jRHHGJcE", "youtube-BTfjdyZOKww"}
    assert set(search(ds, "how do I check that my kernel gives the right answer")[:4]) == correctness
    found = search(ds, "gpu performance engineering")[:8]
    assert {"gtc-gtc24-s62192", "gtc-gtc24-s62191", "gpumode-lecture-008"} <= set(found), found
    assert "youtube-A_20dqGfuWI" not in found  # Building Resilient ML Engineering Skills
