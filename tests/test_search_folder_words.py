"""A lecture's folder in gpu-mode/lectures names what it covers ("coalesce.cu", "occupancy.cu" in
the CUDA Performance Checklist's): its file names' words are searched (search/words.py
`folder_words`), a word many talks hold ("model_train.py") only in a talk's own text."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import sqlite_utils

from gputalks.scraper.github import parse_tree
from gputalks.search.ranking import search_talks
from gputalks.search.words import folder_words

TREE = Path(__file__).parents[2] / "shared" / "data" / "snapshot" / "github" / "tree.json"


def all_words(db: sqlite_utils.Database, query: str) -> list[str]:
    """The talks holding all the query's words (tiers 0 and 1)."""
    return [talk["id"] for talk in search_talks(db, query, 50) if talk["tier"] <= 1]


@pytest.fixture(scope="module")
def folders() -> dict[str, list[str]]:
    return parse_tree(json.loads(TREE.read_text())).folders


def test_the_words_of_a_folders_code_and_slides(folders):
    checklist = folder_words(folders["lecture_008"]).split()
    assert checklist == ["coalesce", "coarsening", "divergence", "occupancy", "privatization", "tiling"]
    # "Grace_Hopper.jpg" is the grayscale kernel's input picture, no talk on Hopper; the folders'
    # boilerplate ("README.md", "Makefile", "cuda_mode_lecture2.pptx") says nothing either.
    basics = folder_words(folders["lecture_002"]).split()
    assert "grayscale" in basics and "addition" in basics
    assert not {"hopper", "grace", "readme", "makefile", "lecture", "mode"} & set(basics)
    # Slides are named for the talk: "AMD_ROCm_Speaking_Composable_Kernel_July_20_2024.pdf".
    assert "composable" in folder_words(folders["lecture_025"]).split()
    # Not the hashes, timestamps and logs of a project's outputs, nor its screenshots.
    fused = folder_words(folders["lecture_018"]).split()
    assert "lora" in fused and "dlrm" in fused
    assert not [word for word in fused if sum(c.isdigit() for c in word) > 2 or word in ("tfevents", "screenshots")]


def test_a_folders_file_names_find_its_lecture(snapshot_db):
    checklist = snapshot_db.table("talks").get("gpumode-lecture-008")
    assert "occupancy" not in f"{checklist['title']} {checklist['description']}".lower()
    assert "occupancy" in checklist["folder_words"].split()
    assert all_words(snapshot_db, "occupancy") == ["gpumode-lecture-008"]  # the others: "related topic"
    # "coalescing" is the Porter stem of "coalesce.cu"
    assert "gpumode-lecture-008" in [talk["id"] for talk in search_talks(snapshot_db, "memory coalescing", 3)]


def test_a_word_many_talks_hold_is_not_found_in_file_names(snapshot_db):
    """"model_train.py" in the Fused Kernels lecture's folder makes it no talk on training: "train"
    is in 11 of 150 talks' text, and only their own text answers for it."""
    fused = snapshot_db.table("talks").get("gpumode-lecture-018")
    assert "train" in fused["folder_words"].split() and "train" not in fused["title"].lower()
    found = [talk["id"] for talk in search_talks(snapshot_db, "train", 50)]
    assert found and "gpumode-lecture-018" not in found


def test_an_index_built_before_folder_words_gains_them(tmp_path, snapshot_db_path):
    """The talks' full-text index gains the column at the next `ensure_schema`."""
    from gputalks.index.schema import ensure_schema
    from tests.conftest import copy_index

    db = sqlite_utils.Database(copy_index(snapshot_db_path, tmp_path / "talks.db"))
    db.table("talks").disable_fts()
    db.table("talks").enable_fts(["title", "search_terms", "description", "speaker_names", "search_labels"],
                                 create_triggers=True, tokenize="porter")
    assert all_words(db, "occupancy") == []
    ensure_schema(db)
    assert all_words(db, "occupancy") == ["gpumode-lecture-008"]


def test_serving_an_index_whose_search_lacks_the_column_brings_it_up_to_date(tmp_path, snapshot_db_path, capsys):
    """An index a downgraded gputalks rebuilt keeps the column but not its full-text index: every
    search would be an error ("no such column: folder_words"); `serve` and `publish` first bring it
    up to date (`bring_up_to_date`, on a copy swapped in), and say so."""
    from gputalks.index.store import bring_up_to_date
    from tests.conftest import copy_index

    path = copy_index(snapshot_db_path, tmp_path / "talks.db")
    db = sqlite_utils.Database(path)
    db.table("talks").disable_fts()
    db.table("talks").enable_fts(["title", "search_terms", "description", "speaker_names", "search_labels"],
                                 create_triggers=True, tokenize="porter")
    db.close()
    bring_up_to_date(path)
    assert "added folder_words (searched)" in capsys.readouterr().err
    assert all_words(sqlite_utils.Database(path), "occupancy") == ["gpumode-lecture-008"]
    assert not list(tmp_path.glob("*.building*"))
