"""Every README version in ../shared/data parses as a careful reader reads it.

The table is what reading each file gives: its lecture count (headings,
each lecture once) and its highest-numbered lecture and title; then a few exact
titles, speakers and links of the versions whose format drifts."""

from __future__ import annotations

import re

import pytest

from gputalks.scraper.github import lecture_items, parse_readme

from tests.conftest import LECTURES, SHARED

HISTORY = SHARED / "real" / "readme-history"

# file -> (lectures, the highest lecture number, its title)
VERSIONS = {
    "README@0d26337.md": (10, 10, "Build a Prod Ready CUDA Library"),
    "README@518d021.md": (32, 31, "Beginners Guide to Metal Kernels"),
    "README@7cb40f6.md": (58, 104, "Gluon: Tile-Based GPU Programming with Low-Level Control"),
    "README@f440c6c.md": (49, 78, "Iris: Multi-GPU Programming in Triton"),
    "README@102d701.md": (30, 29, "Triton Internals"),
    "README@15a8e94.md": (18, 20, "Scan Algorithm"),  # "- ## Lecture 20": a heading inside a list item
    "README@18ff2bf.md": (2, 3, "Getting Started With CUDA"),  # "## Lecture 3" + "- Title: ..."
    "README@2a94cf9.md": (43, 42, ""),  # "# Lecture 42:" names no title anywhere
    "README@2b21975.md": (10, 10, "Build a Prod Ready CUDA Library"),  # lecture 9 written twice
    "README@379e676.md": (22, 22, "Hacker's Guide to Speculative Decoding in VLLM"),
    "README@4f941f5.md": (37, 36, "CUTLASS and Flash ATtention 3"),
    "README@51f80fe.md": (47, 69, "Quartet 4 bit training"),
    "README@5223aa5.md": (34, 33, "BitBLAS"),
    "README@56d44dd.md": (8, 8, "CUDA Performance Checklist"),
    "README@5e73bc1.md": (46, 67, "NCCL & NVSHMEM"),
    "README@6629e76.md": (49, 78, "Iris: Multi-GPU Programming in Triton"),
    "README@738e701.md": (52, 79, "Mirage (MPK): Compiling LLMs into Mega Kernels"),
    "README@7cb08a0.md": (16, 18, "Fused Kernels"),
    "README@8385755.md": (46, 67, "NCLL & NVSHMEM"),
    "README@838fd2d.md": (14, 14, "Practitioner's Guide to Triton"),
    "README@89c25fe.md": (27, 26, "SYCL MODE (Intel GPU)"),
    "README@8ab3a61.md": (14, 14, "Practitioner's Guide to Triton"),
    "README@8b9645c.md": (54, 79, "Mirage (MPK): Compiling LLMs into Mega Kernels"),
    "README@9650d46.md": (28, 27, "gpu.cpp"),
    "README@9bc9de8.md": (33, 32, "Unsloth - LLM Systems Engineering"),
    "README@adaecb4.md": (2, 3, "Getting Started With CUDA"),
    "README@b2c62ab.md": (39, 38, "Lowbit kernels for ARM CPU"),
    "README@b39a52a.md": (56, 86, "Introduction to CuTeDSL (for NVIDIA competition)"),
    "README@branch-d66be37.md": (45, 57, ""),
    "README@c2d75c1.md": (50, 78, "Iris: Multi-GPU Programming in Triton"),
    "README@cde1cbf.md": (3, 4, "Intro to Compute and Memory Architecture"),
    "README@e356318.md": (30, 29, "Triton Internals"),
    "README@e4e8413.md": (8, 8, "CUDA Performance Checklist"),
    "README@f26506c.md": (57, 103, "Fundamentals of CuTe Layout Algebra and Category-theoretic Interpretation"),
    "README@f9f27da.md": (5, 5, "Going Further with CUDA for Python Programmers"),
    "fork-qnkhuat-README@c200981.md": (38, 37, "Introduction to SASS & GPU Microarchitecture"),
}


def path_of(name: str):
    return LECTURES / name if (LECTURES / name).exists() else HISTORY / name


def items_of(name: str):
    return lecture_items(parse_readme(path_of(name).read_text(encoding="utf-8")), None)


def test_the_table_covers_every_readme_in_shared_data():
    found = {p.name for p in LECTURES.glob("README@*.md")} | {p.name for p in HISTORY.glob("*.md")}
    assert found == set(VERSIONS)


@pytest.mark.parametrize("name", sorted(VERSIONS))
def test_every_version_parses(name):
    lectures, last_number, last_title = VERSIONS[name]
    result = items_of(name)
    assert len(result.items) == lectures
    numbered = [i for i in result.items if i.number is not None]
    last = max(numbered, key=lambda i: i.number)
    assert (last.number, last.title) == (last_number, last_title)
    for item in result.items:
        for speaker in item.speakers:
            assert not re.search(r":| and |&|speaker", speaker.name, re.I), (item.key, speaker.name)
        for link in item.links:  # nothing relative or placeholder became a URL
            assert link.url.startswith(("https://", "http://")), (item.key, link.url)


@pytest.mark.parametrize("name", sorted(VERSIONS))
def test_no_section_with_a_title_gets_an_empty_one(name):
    text = path_of(name).read_text(encoding="utf-8")
    for entry in parse_readme(text):
        if not entry.title:  # then neither the heading nor the section names one
            section = text.splitlines()[entry.line - 1: entry.line + 3]
            assert not any(re.match(r"\s*[-*]?\s*title\s*:", line, re.I) for line in section), section


def test_early_titles_under_bare_headings():
    first = {i.number: i for i in items_of("README@adaecb4.md").items}
    assert first[2].title == "Recap Ch. 1-3 from the PMPP book"  # a bare first bullet
    assert first[3].title == "Getting Started With CUDA"  # "- Title: ..."
    assert [s.name for s in first[2].speakers] == ["Andreas Koepf"]
    assert first[2].speakers[0].profile_url == "https://twitter.com/neurosp1ke"
    # The book link on the speaker line is kept, as a book.
    assert [(l.kind, l.url) for l in first[2].links if l.kind == "book"] == [("book", "https://a.co/d/2S2fVzt")]
    assert {i.number: i.title for i in items_of("README@cde1cbf.md").items}[4] == \
        "Intro to Compute and Memory Architecture"


def test_a_heading_in_a_list_item_and_a_repeated_lecture():
    scan = {i.number: i for i in items_of("README@15a8e94.md").items}[20]
    assert [s.name for s in scan.speakers] == ["Izzat El Haj"] and scan.date == "2024-05-25"
    repeated = items_of("README@2b21975.md")
    assert [p.reason for p in repeated.problems if "repeated" in p.reason] == [
        "README line 71: lecture heading repeated (first at line 59); kept the first"]
    nine = {i.number: i for i in repeated.items}[9]
    assert nine.date == "2024-03-09"  # the first one's date, not the second's "2024"
    assert ("video", "https://www.youtube.com/watch?v=09wntC6BT5o") in [(l.kind, l.url) for l in nine.links]


def test_a_placeholder_link_is_a_problem_not_a_url():
    result = items_of("README@4f941f5.md")
    cutlass = {i.number: i for i in result.items}[36]
    assert [s.name for s in cutlass.speakers] == ["Jay Shah"]
    assert not any(l.kind == "slides" for l in cutlass.links)
    assert "README line 156: link [Slides](test) points at nothing; not kept" in [p.reason for p in result.problems]


def test_speaker_lines_of_every_shape():
    speakers = {i.number: [s.name for s in i.speakers] for i in items_of("README@738e701.md").items}
    assert speakers[79] == ["Mengdi Wu", "Xinhao Cheng"]  # a bare "Speakers:" line
    newest = {i.number: [s.name for s in i.speakers] for i in items_of("README@7cb40f6.md").items}
    assert newest[67] == ["Jeff Hammond"]
    fork = {i.number: i for i in items_of("fork-qnkhuat-README@c200981.md").items}[37]
    assert fork.speakers[0].name == "Arun Demeure" and fork.speakers[0].profile_url == "https://github.com/ademeure"


def test_an_affiliation_prefix_is_split_off(tmp_path):
    text = "## Lecture 90: Hopper GEMMs\n- Speakers: NVIDIA: Vijay Thakkar, Pradeep Ramani\n"
    item = lecture_items(parse_readme(text), None).items[0]
    assert [(s.name, s.affiliation) for s in item.speakers] == [("Vijay Thakkar", "NVIDIA"),
                                                               ("Pradeep Ramani", "NVIDIA")]
