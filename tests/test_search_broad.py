"""Broad concepts and topics (topics.toml `[search] broad`): named beside a word that tells
talks apart, they narrow nothing, on the server and in the static site's search."""

from __future__ import annotations

import asyncio
import sqlite3

import pytest

from gputalks.project.validation import ConfigError, TopicsFile, validated
from gputalks.search.functions import register
from gputalks.search.query import Unit, widened
from gputalks.search.vocabulary import load_vocabulary
from gputalks.site.serve import served_datasette

PYTHON_TALKS = {"gtc-gtcfall21-a31138", "gtc-gtcfall21-a31149", "gpumode-lecture-005"}  # their titles say Python


@pytest.fixture(scope="module")
def ds(snapshot_db_path):
    return served_datasette(snapshot_db_path)


def first_five(ds, query: str) -> list[str]:
    async def inner():
        return (await ds.client.get("/search.json", params={"q": query})).json()["results"]
    return [result["id"] for result in asyncio.run(inner())[:5]]


def test_the_broad_list_is_what_a_fifth_of_the_snapshots_talks_are_about(snapshot_db_path):
    """The list is data a maintainer keeps; it holds what the index measures: the concepts and
    topics whose talks (through their terms and labels, as "related topic" widens them) are a
    sixth of the talks or more (17 % to 28 %), and no other (the next: 12 %)."""
    with sqlite3.connect(snapshot_db_path) as conn:
        register(conn)
        vocabulary = load_vocabulary(conn)
        topics = {topic for names in vocabulary.aliases.values() for topic in names}
        units = [Unit(("-",), concept=concept) for concept in vocabulary.terms] + \
                [Unit(("-",), topics=(topic,)) for topic in topics]
        share = {(unit.concept or unit.topics[0]): conn.execute(
            "select count(*) from talks_fts where talks_fts match ?", [widened(unit, vocabulary)]).fetchone()[0]
            / vocabulary.talks for unit in units}
    assert vocabulary.broad == {name for name, part in share.items() if part >= 1 / 6}, sorted(share.items())
    assert vocabulary.broad == {"getting started", "writing a kernel", "CUDA basics", "making it faster"}


def test_a_broad_concept_beside_a_telling_word_narrows_nothing(ds):
    """"write kernels" names writing a kernel, which 34 of the 150 talks are about (through
    "kernel", "gpu programming"...): "related topic" listed those 34 before the SYCL talk, "SYCL
    MODE (Intel GPU)" (35th), and the Python talks after 30 kernel talks. Beside "intel" or
    "python" it narrows nothing now: those talks come first."""
    assert first_five(ds, "how do I write kernels for intel gpus")[0] == "gpumode-lecture-026"
    assert PYTHON_TALKS <= set(first_five(ds, "programmer le gpu en python"))


def test_going_faster_is_how_not_what(ds):
    """"optimize", "faster", "accélérer" name making it faster, a concept apart from profiling
    (measuring: "slow", "bottleneck"): beside attention it narrows nothing, and "optimiser
    l'attention" lists attention talks, where talks on performance and on attention took turns
    ("How FlashAttention 4 Works", "Flash Infer" 7th and 8th)."""
    attention = set(first_five(ds, "optimiser l'attention"))
    assert {"gpumode-lecture-012", "youtube-VPslgC9piIw", "gpumode-lecture-040"} <= attention
    assert "gpumode-lecture-016" in first_five(ds, "why is my kernel slow")  # On Hands profiling


def test_broad_things_named_alone_still_narrow(ds):
    """Named only beside one another ("start learning", "cuda"), broad things still make "related
    topic": the courses come first."""
    assert {"youtube-86FAWCzIe_4", "gpumode-lecture-003"} <= set(first_five(ds, "where should I start learning cuda"))


def test_a_word_no_talk_holds_tells_no_talks_apart(ds):
    """"shuffles" is in no talk: beside it, "warp" (a CUDA basics alias, a broad topic) is all the
    query names, and its talks come as "some of your words", where nothing came. ("warp
    specialization", this test's query until it became a concept of its own, found nothing.)"""
    async def inner():
        return (await ds.client.get("/search.json", params={"q": "warp shuffles"})).json()["results"]
    found = asyncio.run(inner())
    assert found and all(result["tier"] == 4 and "CUDA basics" in result["topics"] for result in found[:10])


def test_a_broad_name_that_is_no_topic_or_concept_is_a_one_line_error():
    with pytest.raises(ConfigError, match=r"^topics.toml: .*search.broad: kernels is neither a topic nor a concept$"):
        validated(TopicsFile, {"topics": [{"name": "x", "aliases": ["x"]}], "search": {"broad": ["kernels"]}},
                  "topics.toml")
