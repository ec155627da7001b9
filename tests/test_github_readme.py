"""The gpu-mode/lectures README parser on all four real README versions."""

import json

import pytest

from gputalks.scraper.github import LectureEntry, classify_link, lecture_items, parse_readme, parse_tree

from tests.conftest import LECTURES, SNAPSHOT


def entries(commit: str) -> dict[str, LectureEntry]:
    return {e.key: e for e in parse_readme((LECTURES / f"README@{commit}.md").read_text())}


@pytest.mark.parametrize("commit, count, bonus", [
    ("0d26337", 10, 0), ("518d021", 32, 1), ("f440c6c", 49, 1), ("7cb40f6", 58, 1)])
def test_every_version_parses(commit, count, bonus):
    parsed = list(entries(commit).values())
    assert len(parsed) == count
    assert sum(e.number is None for e in parsed) == bonus
    assert all(e.speakers for e in parsed), [e.key for e in parsed if not e.speakers]


def test_snapshot_readme_is_the_newest_version():
    assert (SNAPSHOT / "github/readme.md").read_text() == (LECTURES / "README@7cb40f6.md").read_text()


def test_newest_titles_numbers_and_gaps():
    parsed = entries("7cb40f6")
    numbers = sorted(e.number for e in parsed.values() if e.number is not None)
    assert numbers[:5] == [1, 2, 3, 4, 5] and numbers[-3:] == [86, 103, 104]
    assert 44 not in numbers and 73 not in numbers  # numbering gaps are real
    assert parsed["lecture-012"].title == "Flash Attention"
    assert parsed["lecture-001"].title == "Profiling and Integrating CUDA kernels in PyTorch"
    assert parsed["lecture-043"].title == ""  # "## Lecture 43:"
    assert parsed["bonus-cuda-c-llm-cpp"].title == "CUDA C++ llm.cpp"


def test_speaker_forms():
    parsed = entries("7cb40f6")
    names = lambda key: [s.name for s in parsed[key].speakers]
    # linked name with profile URL
    assert parsed["lecture-012"].speakers[0].name == "Thomas Viehmann"
    assert parsed["lecture-012"].speakers[0].profile_url == "https://lernapparat.de/"
    # "&" inside one link with an empty href
    assert names("bonus-cuda-c-llm-cpp") == ["Jake Hemstad", "Georgii Evtushenko"]
    # bare "&" list
    assert names("lecture-023") == ["Vijay Thakkar", "Pradeep Ramani"]
    # "Speaker 1:" / "Speaker 2:" with nested slides
    assert names("lecture-075") == ["William Brandon", "Simran Arora"]
    assert parsed["lecture-075"].speakers[1].profile_url == "https://arorasimran.com"
    # a bare (non-bullet) "Speakers:" line with commas and "&"
    assert names("lecture-078") == ["Muhammad Awad", "Muhammad Osama", "Brandon Potter"]
    # "and"
    assert names("lecture-103") == ["Jack Carlisle", "Jay Shah"]
    assert names("lecture-069") == ["Roberto Castro", "Andrei Panferov"]
    assert names("lecture-104") == ["Peter Bell", "Mario Lezcano", "Keren Zhou"]


def test_series_tag_date_and_links():
    parsed = entries("7cb40f6")
    assert parsed["lecture-071"].series_tag == "ScaleML Series"
    assert parsed["lecture-071"].title == "FlexOlmo: Open Language Models for Flexible Data Use"
    assert parsed["lecture-014"].date == "2024-04-13"
    kinds = lambda key: sorted(l.kind for l in parsed[key].links)
    assert kinds("lecture-028") == ["colab"] * 5 + ["slides"]
    assert kinds("lecture-069") == ["code", "code", "paper"]  # bare URLs are links too
    assert kinds("lecture-014") == ["notebook"]
    assert kinds("lecture-003") == ["colab", "folder"]
    assert classify_link("Slides", "https://docs.google.com/presentation/d/x") == "slides"


def test_oldest_version_has_videos_dates_and_old_folder_names():
    parsed = entries("0d26337")
    first = parsed["lecture-001"]
    assert first.date == "2024-01-13"
    assert [l.url for l in first.links if l.kind == "video"] == ["https://youtu.be/LuhJEEJQgUM"]
    assert first.folders == ["lecture1"]
    videos = [l for e in parsed.values() for l in e.links if l.kind == "video"]
    assert len(videos) == 10


def test_tree_folders_and_mismatch():
    tree = parse_tree(json.loads((LECTURES / "tree@7cb40f6.json").read_text()))
    assert "lecture_001" in tree.folders and "lecture_043" not in tree.folders
    result = lecture_items(list(entries("7cb40f6").values()), tree)
    items = {i.key: i for i in result.items}
    assert items["lecture-043"].folder_mismatch == ["lecture_042"]
    assert items["lecture-043"].folder is None  # lecture_042 is not lecture 43's folder
    assert items["lecture-012"].folder == "lecture_012"
    assert items["lecture-012"].folder_files  # the folder's files are listed
    mismatch = [p for p in result.problems if p.item == "lecture-043"]
    assert any("lecture_042" in p.reason for p in mismatch)
    # a relative slides link becomes a GitHub URL
    assert any(l.url == "https://github.com/gpu-mode/lectures/blob/main/lecture_011/sparsity.pptx"
               for l in items["lecture-011"].links)
