"""The matcher on the real README and the real YouTube listing."""

import re

import pytest

from gputalks.index.link import link_talks
from gputalks.index.overrides import Overrides
from gputalks.index.merge import merge_talk
from gputalks.project.resources import DEFAULT_OVERRIDES
from gputalks.index.similarity import LectureMatcher
from gputalks.scraper import github, youtube
from gputalks.scraper.github import parse_readme

from tests.conftest import LECTURES, SHARED
from tests.test_gtc import snapshot_documents
from tests.test_youtube import doc

# Lecture -> video pairs checked by hand against both titles (numbers disagree
# at 40/41; the README's titles differ from YouTube's throughout).
CHECKED = {
    12: "zEuwuCTEf_0", 13: "ws7angQYIxI", 14: "DdTsX6DQk24", 15: "G6q719ck7ww", 16: "SKV6kDk1s94",
    17: "T22e3fgit-A", 18: "m6BSREnQ84U", 20: "ZKrWyEqqPVY", 21: "MH5_FeSSdIE", 23: "hQ9GPnV0-50",
    25: "-732zELVbpU", 36: "JwUcZwPOCpA", 40: "iOLBJwENuvA", 41: "qmpGv72qPCE", 75: "Cl2B_hmg4gA",
    79: "sXDdRCy137c", 103: "MVh_guNbWMA",
}


def ground_truth() -> dict[int, str]:
    """Video links the 2024-03 README carried for the early lectures, plus CHECKED."""
    truth = dict(CHECKED)
    for entry in parse_readme((LECTURES / "README@0d26337.md").read_text()):
        for link in entry.links:
            if link.kind == "video":
                truth[entry.number] = re.search(r"(?:youtu\.be/|v=)([\w-]{11})", link.url).group(1)
    return truth


@pytest.fixture(scope="module")
def items(config):
    github_items = github.parse(snapshot_documents("github"), config["github"]).items
    listing = doc("youtube/gpumode-videos.json", "https://www.youtube.com/@GPUMODE/videos")
    youtube_items = youtube.parse([listing], config["youtube"]).items
    return github_items + youtube_items


def video_of(result) -> dict[str, list[str]]:
    return {c.talk_id: [m.item_key for m in c.matches if m.source == "youtube"] for c in result.clusters}


def test_matcher_finds_the_ground_truth_pairs(items):
    truth = ground_truth()
    assert len(truth) >= 20
    result = link_talks(items)  # the matcher alone, no overrides
    videos = video_of(result)
    for number, video_id in truth.items():
        assert videos[f"gpumode-lecture-{number:03d}"] == [video_id], number
    # numbers disagree: the README's 40 "Flash Infer" is YouTube's 41 "FlashInfer"
    methods = {(m.talk_id, m.item_key): m.method for c in result.clusters for m in c.matches}
    assert methods[("gpumode-lecture-040", "iOLBJwENuvA")] == "title"
    assert methods[("gpumode-lecture-012", "zEuwuCTEf_0")] == "number+title"


def test_no_lecture_has_two_videos_and_no_video_two_talks(items):
    result = link_talks(items, Overrides.load(DEFAULT_OVERRIDES))
    for talk_id, video_ids in video_of(result).items():
        assert len(video_ids) <= 1, talk_id
    placed = [m.item_key for c in result.clusters for m in c.matches]
    assert len(placed) == len(set(placed)) == len(items)


def test_unconfirmed_lectures_are_reported_not_guessed(items):
    result = link_talks(items)
    assert video_of(result)["gpumode-lecture-043"] == []  # empty title: nothing to confirm with
    unlinked = {p.item for p in result.problems if p.severity == "unlinked"}
    assert {"lecture-043", "lecture-086", "lecture-104"} <= unlinked
    matched = sum(1 for c in result.clusters if c.talk_id.startswith("gpumode-")
                  and any(m.source == "youtube" for m in c.matches))
    assert matched == 55


def test_overrides_win(items, tmp_path):
    overrides = Overrides.load(DEFAULT_OVERRIDES)
    result = link_talks(items, overrides)
    assert video_of(result)["gpumode-lecture-043"] == ["BgGe_erJB1A"]
    never = tmp_path / "overrides.toml"
    never.write_text('[[never]]\ntalk = "gpumode-lecture-012"\nitem = "youtube:zEuwuCTEf_0"\n')
    result = link_talks(items, Overrides.load(never))
    assert video_of(result)["gpumode-lecture-012"] == []
    assert "youtube-zEuwuCTEf_0" in video_of(result)


def test_bad_overrides_file_is_a_clear_error(tmp_path):
    bad = tmp_path / "overrides.toml"
    bad.write_text('[[same]]\ntalk = "gpumode-lecture-012"\nitem = "zEuwuCTEf_0"\n')
    with pytest.raises(ValueError, match="item: expected .source:key."):
        Overrides.load(bad)


def test_merged_lecture_takes_fields_from_the_best_source(items):
    result = link_talks(items)
    cluster = next(c for c in result.clusters if c.talk_id == "gpumode-lecture-075")
    talk = merge_talk(cluster)
    assert talk.row["title"] == "GPU Programming Fundamentals + ThunderKittens"  # README
    assert talk.row["duration_s"] == 9562  # video
    assert [s.name for s in talk.speakers] == ["William Brandon", "Simran Arora"]  # README
    assert talk.row["youtube_url"] == "https://www.youtube.com/watch?v=Cl2B_hmg4gA"
    assert '"duration_s": "youtube"' in talk.row["field_sources"]
    assert '"speakers": "github"' in talk.row["field_sources"]


def readme_items(text: str, config) -> list:
    return github.lecture_items(parse_readme(text), None).items


def test_readme_video_links_link_with_certainty(items, config):
    """The 2024-02-18 README writes `- [Video](https://youtu.be/...)` under lectures 1-5."""
    text = (SHARED / "real" / "readme-history" / "README@f9f27da.md").read_text()
    # The same version with every heading's title removed: only the links can tell.
    bare = re.sub(r"(?m)^(## Lecture \d+):.*$", r"\1", text)
    videos = [i for i in items if i.source == "youtube"]
    expected = {1: "LuhJEEJQgUM", 2: "NQ-0D5Ti2dc", 3: "4sgKnKbR-WE", 4: "lTmYrKwjSOU", 5: "wVsR-YhaHlM"}
    for version in (text, bare):
        result = link_talks(readme_items(version, config) + videos)
        methods = {(m.talk_id, m.item_key): m.method for c in result.clusters for m in c.matches}
        for number, video_id in expected.items():
            assert methods[(f"gpumode-lecture-{number:03d}", video_id)] == "readme-link", number
        assert not [p for p in result.problems if "the README links" in p.reason]


def test_a_readme_link_the_matcher_disagrees_with_is_reported(items, config):
    text = (SHARED / "real" / "readme-history" / "README@f9f27da.md").read_text()
    swapped = text.replace("https://youtu.be/LuhJEEJQgUM", "https://youtu.be/XXXXXXXXXXX") \
                  .replace("https://youtu.be/NQ-0D5Ti2dc", "https://youtu.be/LuhJEEJQgUM")
    result = link_talks(readme_items(swapped, config) + [i for i in items if i.source == "youtube"])
    assert video_of(result)["gpumode-lecture-002"] == ["LuhJEEJQgUM"]  # the README's word stands
    reasons = [p.reason for p in result.problems if p.item == "lecture-002"]
    assert any("the README links video LuhJEEJQgUM" in r and "would choose NQ-0D5Ti2dc" in r for r in reasons)


def test_an_override_beats_a_readme_link(items, config, tmp_path):
    text = (SHARED / "real" / "readme-history" / "README@f9f27da.md").read_text()
    overrides = tmp_path / "overrides.toml"
    overrides.write_text('[[never]]\ntalk = "gpumode-lecture-001"\nitem = "youtube:LuhJEEJQgUM"\n')
    result = link_talks(readme_items(text, config) + [i for i in items if i.source == "youtube"],
                        Overrides.load(overrides))
    assert "LuhJEEJQgUM" not in video_of(result)["gpumode-lecture-001"]


def test_the_matcher_without_some_videos_is_the_one_built_from_the_rest(items):
    """The linker derives the matcher of the videos still unplaced from the one over every
    video; on the real listing it offers exactly what building it from the rest would."""
    videos = [i for i in items if i.source == "youtube"]
    lectures = [i for i in items if i.source == "github"]
    dropped = videos[::3]  # a third of them placed already
    derived = LectureMatcher(videos).without(dropped)
    built = LectureMatcher([v for v in videos if v not in dropped])
    assert derived.index.postings == built.index.postings
    assert derived.by_number == built.by_number
    offered = {lecture.key: [(v.key, s) for v, s in derived.scored(lecture)] for lecture in lectures}
    assert offered == {lecture.key: [(v.key, s) for v, s in built.scored(lecture)] for lecture in lectures}
    assert sum(map(len, offered.values())) > 30  # 39 candidate pairs on the real listing
    assert not {v.key for v in dropped} & {key for pairs in offered.values() for key, _ in pairs}
    # so does the one built for the lectures alone, as the linker builds it
    asked = LectureMatcher(videos, lectures).without(dropped)
    assert asked.index.postings == LectureMatcher([v for v in videos if v not in dropped], lectures).index.postings


def test_a_matcher_built_for_the_lectures_offers_what_the_whole_index_does(items):
    """Holding only the keys of the titles it will be asked about changes no candidate."""
    videos = [i for i in items if i.source == "youtube"]
    lectures = [i for i in items if i.source == "github"]
    whole, for_lectures = LectureMatcher(videos), LectureMatcher(videos, lectures)
    assert len(for_lectures.index.postings) < len(whole.index.postings) / 2
    offered = {lecture.key: [(v.key, s) for v, s in for_lectures.scored(lecture)] for lecture in lectures}
    assert offered == {lecture.key: [(v.key, s) for v, s in whole.scored(lecture)] for lecture in lectures}
    assert sum(map(len, offered.values())) > 30
    with pytest.raises(ValueError, match="not built to be asked about"):
        for_lectures.index.candidates(videos[0].title + " Zyzzyva")


def test_a_pair_both_same_and_never_is_a_configuration_error(tmp_path):
    import pytest

    from gputalks.index.overrides import Overrides
    from gputalks.project.validation import ConfigError

    path = tmp_path / "overrides.toml"
    path.write_text('[[same]]\ntalk = "gpumode-lecture-012"\nitem = "youtube:zEuwuCTEf_0"\n'
                    '[[never]]\ntalk = "gpumode-lecture-012"\nitem = "youtube:zEuwuCTEf_0"\n')
    with pytest.raises(ConfigError) as error:
        Overrides.load(path)
    assert error.value.lines == ["overrides.toml: talk 'gpumode-lecture-012' and item 'youtube:zEuwuCTEf_0' are "
                                   "both [[same]] and [[never]]; keep the one you mean"]
