"""Topics from the shipped vocabulary on the real snapshot, and the search terms
that let compound words and their parts find each other."""

from __future__ import annotations

import json

import pytest
import sqlite_utils

from gputalks.index.enrich import Vocabulary, search_labels, search_terms
from gputalks.search.words import tokens, word_line
from gputalks.project.resources import DEFAULT_TOPICS
from gputalks.project.validation import ConfigError, TopicsFile, validated

from tests.conftest import SHARED

KNOWN = {
    "gpumode-lecture-007": "Quantization and low precision",
    "gpumode-lecture-012": "Attention",
    "gpumode-lecture-014": "Triton",
    "gpumode-lecture-015": "CUTLASS / CuTe",
    "gpumode-lecture-016": "Profiling and performance",
    "gpumode-lecture-017": "Collectives and multi-GPU",
    "gpumode-lecture-022": "Inference serving",
    "gpumode-lecture-026": "Other hardware",
    "gtc-gtcspring22-s41723": "Memory and architecture",
    "youtube-VPslgC9piIw": "Attention",
}


@pytest.fixture(scope="module")
def talks(snapshot_db_path):
    db = sqlite_utils.Database(snapshot_db_path)
    return {row["id"]: row for row in db.query("select id, title, topics, topic from talks where gone_since is null")}


def test_nine_in_ten_talks_have_a_topic(talks):
    with_topic = [t for t in talks.values() if json.loads(t["topics"])]
    assert len(with_topic) / len(talks) >= 0.9, [t["title"] for t in talks.values() if t not in with_topic]


def test_ten_known_talks_have_their_topic(talks):
    assert {talk_id: topic for talk_id, topic in KNOWN.items() if topic in json.loads(talks[talk_id]["topics"])} \
        == KNOWN


def test_search_terms_join_and_split_compound_words():
    terms = search_terms
    assert terms("How FlashAttention 4 Works") == "Flash Attention HowFlashAttention"
    assert terms("Flash Attention") == "FlashAttention"
    assert terms("CuTeDSL") == "Cu Te DSL CuTe TeDSL"  # of three parts, adjacent ones joined: "cute" finds it
    assert terms("4") is None
    # Words with no capital past their first letter are not split; all others are.
    assert terms("GEMMs on H100 and x86") == "GEM Ms GEMMson"
    assert terms("cuBLAS vs cuda 12") == "cu BLAS cuBLASvs vscuda"
    assert terms("iPhone MLPerf a100") == "i Phone ML Perf iPhoneMLPerf"
    assert terms("Lecture 1: profiling") is None


def test_search_labels_are_the_series_event_year_and_topics():
    row = {"title": "CUTLASS Deep Dive", "series": "GTC", "event": "GTC 2024", "year": 2024,
           "topics": '["CUTLASS / CuTe", "Hopper"]'}
    assert search_labels(row) == "GTC\nGTC 2024\n2024\nCUTLASS / CuTe\nHopper"
    assert search_labels({"title": "x", "topics": "[]"}) is None


def test_a_topic_without_aliases_is_a_one_line_error():
    with pytest.raises(ConfigError, match=r"^topics.toml: \[\[topics\]\] #1 aliases: List should have at least 1 item"):
        validated(TopicsFile, {"topics": [{"name": "x", "aliases": []}]}, "topics.toml")


def test_aliases_match_whole_words_in_every_spelling():
    vocabulary = Vocabulary.load(DEFAULT_TOPICS)
    attention = vocabulary.names.index("Attention")
    for text in ("Flash Attention", "flash-attention kernels", "How FlashAttention 4 Works", "FLASH\nATTENTION"):
        assert vocabulary.mentions(text)[attention] >= 1, text
    assert vocabulary.mentions("attentions and flashy attentiveness")[attention] == 0  # whole words only
    compilers = vocabulary.names.index("Compilers and DSLs")
    assert vocabulary.mentions("torch.compile and MLIR")[compilers] == 3  # "compile", "torch.compile", "mlir"


def test_the_fast_word_line_splits_real_text_as_the_word_regex_does():
    """`word_line` (C's byte translation for ASCII) must give the very words of `tokens`,
    on every line of real documents: 31 READMEs, yt-dlp info dicts, a caption file."""
    real = SHARED / "real"
    texts = [p.read_text(encoding="utf-8") for p in sorted((real / "readme-history").iterdir())]
    texts += [p.read_text(encoding="utf-8") for p in sorted((real / "vtt").glob("*.vtt"))]
    texts += [json.dumps(json.loads(p.read_text(encoding="utf-8")), ensure_ascii=False)
              for p in sorted((real / "ytdlp").glob("*.json"))]
    lines = [line for text in texts for line in text.splitlines()]
    lines += ["CUDA—the FlashAttention’s kernels", "Ünïcode_and ASCII\tmixed  İstanbul"]
    assert sum(not line.isascii() for line in lines) > 2  # both paths are taken
    for line in lines:
        assert word_line(line).split() == tokens(line), line
        assert word_line(line).startswith(" ") and word_line(line).endswith(" ")


def test_a_compound_words_parts_name_topics(talks):
    """"HipKittens" is the HIP (AMD) kittens: the alias "hip" names its topic through the compound's
    parts, as "CuTeDSL" names the DSLs; before, only whole title words named topics."""
    assert "AMD GPUs" in json.loads(talks["youtube-jsYyF03Fs3o"]["topics"])
    assert "Compilers and DSLs" in json.loads(talks["gpumode-lecture-086"]["topics"])
