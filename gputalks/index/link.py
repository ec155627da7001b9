"""Linking: one talk however many sources mention it.

A GPU MODE lecture is linked to the YouTube video its README section links
(`readme-link`, certain); otherwise to a video by the
lecture number in the video title *confirmed* by title similarity (numbers
disagree between sources), or by title similarity alone when no number
agrees. A GTC session is linked to its YouTube upload by the On-Demand URL in
the description (certain) or by title, year and speaker similarity. A GTC
catalog entry joins the On-Demand session its code names (`session-code`,
certain), else the session of the same title and year. A video nothing
links rejoins the talk it last belonged to while that talk holds no other
video (`kept`). Every link keeps its method and score; a best candidate
below the threshold is left unlinked and reported. Manual overrides (a project's overrides.toml) win.
Scores come from `similarity.py`.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass, field

from gputalks.scraper.records import Problem, TalkItem
from gputalks.scraper.titles import youtube_id_from_url
from gputalks.index.overrides import Overrides
from gputalks.index.similarity import TITLE_ONLY, LectureMatcher, TitleIndex, session_score, years_differ

# Scores are 0-100.
GTC_LINK = 80  # title (+ year, speaker, abstract) score that links a video to a session
REPORT_BELOW = 50  # best GTC candidates at or above this, but below the bar, are reported

ONDEMAND_RE = re.compile(r"on-demand/session/(?P<slug>[A-Za-z0-9]+-[A-Za-z0-9]+)", re.I)


@dataclass(slots=True)
class Match:
    source: str
    item_key: str
    talk_id: str
    method: str
    score: float


@dataclass(slots=True)
class TalkCluster:
    """A talk's items; `matches[n]` says how `items[n]` was linked."""

    talk_id: str
    items: list[TalkItem] = field(default_factory=list)
    matches: list[Match] = field(default_factory=list)

    def add(self, item: TalkItem, method: str, score: float) -> None:
        self.items.append(item)
        self.matches.append(Match(item.source, item.key, self.talk_id, method, round(score, 1)))


@dataclass(frozen=True, slots=True)
class LastLink:
    """The talk an item belonged to in the served index, not a talk of its own, and the link's score."""

    talk_id: str
    score: float


@dataclass(slots=True)
class LinkResult:
    clusters: list[TalkCluster]
    problems: list[Problem]


def item_ref(item: TalkItem) -> str:
    return f"{item.source}:{item.key}"


def talk_id_for(item: TalkItem) -> str:
    """The stable id of the talk an unlinked item starts."""
    if item.source == "github":
        return f"gpumode-{item.key}"
    return f"{item.source}-{item.key}"


def link_talks(items: list[TalkItem], overrides: Overrides | None = None,
               previous: Mapping[str, LastLink] | None = None) -> LinkResult:
    """Group items into talks; see the module docstring for the rules. `previous` maps an
    item (`item_ref`) to the talk it last belonged to where that was not a talk of its own:
    a video left on its own rejoins that talk while the talk holds no other video (`kept`),
    else keeps its id while no other item holds it."""
    overrides = overrides or Overrides()
    previous = previous or {}
    clusters: dict[str, TalkCluster] = {}
    problems: list[Problem] = []
    # Only the items an override names: a map of every item would hold a string a talk.
    by_ref = {ref: i for i in items if (ref := item_ref(i)) in overrides.same}

    def cluster(talk_id: str) -> TalkCluster:
        return clusters.setdefault(talk_id, TalkCluster(talk_id))

    lectures = [i for i in items if i.source == "github"]
    sessions = [i for i in items if i.source == "gtc" and not i.from_catalog]
    catalog = [i for i in items if i.source == "gtc" and i.from_catalog]
    videos = [i for i in items if i.source == "youtube"]
    for item in lectures + sessions:
        cluster(talk_id_for(item)).add(item, "source", 100.0)
    gtc_videos = [video for video in videos if _looks_like_gtc(video)]
    # Asked about by catalog entries (2) and videos that look like GTC talks (6).
    session_index = TitleIndex(sessions, [entry.title for entry in catalog] + [video.title for video in gtc_videos])

    placed: set[str] = set()
    # 1. Overrides win.
    for ref, talk_id in overrides.same.items():
        if ref in by_ref:
            cluster(talk_id).add(by_ref[ref], "override", 100.0)
            placed.add(ref)

    def allowed(talk_id: str, item: TalkItem) -> bool:
        return (talk_id, item_ref(item)) not in overrides.never and item_ref(item) not in placed

    # 2. Catalog entries join the On-Demand session their code names (certain), else
    #    the one of the same title and year.
    session_by_slug = {s.key.lower(): s for s in sessions}
    catalog_only: list[TalkItem] = []
    for entry in catalog:
        if not allowed("", entry):
            continue
        recording = session_by_slug.get(entry.session_slug or "")
        if recording is not None and allowed(talk_id_for(recording), entry):
            cluster(talk_id_for(recording)).add(entry, "session-code", 100.0)
            placed.add(item_ref(entry))
            continue
        # A session of another year scores at most 100 - YEAR_MISMATCH (similarity.py) without an abstract to
        # compare, below TITLE_ONLY: it is not scored (most candidates of a catalog's new year).
        candidates = [s for s in session_index.candidates(entry.title) if not years_differ(entry, s)]
        best = _best(entry, candidates, lambda s: session_score(entry, s, with_abstract=False), allowed)
        if best and best[1] >= TITLE_ONLY:
            cluster(talk_id_for(best[0])).add(entry, "catalog-title", best[1])
        else:
            cluster(talk_id_for(entry)).add(entry, "source", 100.0)
            catalog_only.append(entry)
        placed.add(item_ref(entry))

    # 3. A video whose description holds an On-Demand URL is that session.
    for video in videos:
        found = ONDEMAND_RE.search(video.description or "")
        if found and found["slug"].lower() in session_by_slug and allowed(
                talk_id_for(session_by_slug[found["slug"].lower()]), video):
            cluster(talk_id_for(session_by_slug[found["slug"].lower()])).add(video, "ondemand-url", 100.0)
            placed.add(item_ref(video))

    # 4. A video the README itself links under a lecture is that lecture's: the
    #    most certain evidence there is (overrides still win).
    taken_talks = {m.talk_id for c in clusters.values() for m in c.matches if m.source == "youtube"}
    videos_by_id = {v.key: v for v in videos}
    readme_linked: list[tuple[TalkItem, TalkItem]] = []
    for lecture in lectures:
        talk_id = talk_id_for(lecture)
        for video in _readme_videos(lecture, videos_by_id):
            if talk_id not in taken_talks and allowed(talk_id, video):
                cluster(talk_id).add(video, "readme-link", 100.0)
                placed.add(item_ref(video))
                taken_talks.add(talk_id)
                readme_linked.append((lecture, video))

    # 5. GPU MODE lectures <-> videos: every candidate pair scored, best first,
    #    each lecture and each video used once.
    pairs = []
    every_video = LectureMatcher(videos, lectures)
    matcher = every_video.without([v for v in videos if item_ref(v) in placed])
    for lecture in lectures:
        talk_id = talk_id_for(lecture)
        if talk_id in taken_talks:
            continue
        for video, scored in matcher.scored(lecture):
            if allowed(talk_id, video):
                pairs.append((scored[1] + (10 if scored[0] != "title" else 0), scored, lecture, video))
    pairs.sort(key=lambda p: (-p[0], p[2].key, p[3].key))
    linked_lectures: set[str] = set()
    for _, (method, score), lecture, video in pairs:
        if lecture.key in linked_lectures or item_ref(video) in placed:
            continue
        cluster(talk_id_for(lecture)).add(video, method, score)
        linked_lectures.add(lecture.key)
        placed.add(item_ref(video))
    del matcher, pairs

    problems.extend(_contradicted(readme_linked, every_video))
    del every_video

    # 6. GTC sessions <-> videos by title, year, speakers, abstract; only for
    #    videos that say they are GTC talks (series, title or description).
    #    A session known only from a catalog (no recording followed) is a candidate too.
    catalog_index = TitleIndex(catalog_only, [video.title for video in gtc_videos]) if catalog_only else None
    for video in gtc_videos:
        if item_ref(video) in placed:
            continue
        candidates = session_index.candidates(video.title)
        if catalog_index is not None:
            candidates += catalog_index.candidates(video.title)
        best = _best(video, candidates, lambda s: session_score(s, video, with_abstract=True), allowed)
        if best and best[1] >= GTC_LINK:
            cluster(talk_id_for(best[0])).add(video, "gtc-title", best[1])
            placed.add(item_ref(video))
        elif best and best[1] >= REPORT_BELOW:
            problems.append(Problem("youtube", video.key, f"'{video.title}': best GTC candidate "
                                    f"{best[0].key} scored {best[1]:.0f} < {GTC_LINK}; left unlinked",
                                    severity="unlinked"))

    # 7. A video left over rejoins the talk it last belonged to while that talk holds no other
    #    video (nothing this build read links either elsewhere: a listing that lost the title a
    #    lecture was matched by takes nothing from the lecture's talk); else it is a talk of its
    #    own, under the id of that talk while no other item holds it (a lecture's video through
    #    a week without the README's section). Lectures without a video are reported.
    for video in videos:
        if item_ref(video) in placed:
            continue
        last = previous.get(item_ref(video))
        if last and last.talk_id in clusters and allowed(last.talk_id, video) and not _has_video(clusters[last.talk_id]):
            cluster(last.talk_id).add(video, "kept", last.score)
        else:
            free = last is not None and last.talk_id not in clusters
            cluster(last.talk_id if free else talk_id_for(video)).add(video, "source", 100.0)
    for lecture in lectures:
        talk_id = talk_id_for(lecture)
        if not _has_video(clusters[talk_id]):
            problems.append(Problem("github", lecture.key, f"lecture {lecture.number or 'bonus'} "
                                    f"'{lecture.title}': no YouTube video found", severity="unlinked"))
    return LinkResult(clusters=sorted(clusters.values(), key=lambda c: c.talk_id), problems=problems)


def _has_video(cluster: TalkCluster) -> bool:
    return any(m.source == "youtube" for m in cluster.matches)


def _readme_videos(lecture: TalkItem, videos_by_id: dict[str, TalkItem]) -> list[TalkItem]:
    """The known videos a lecture's README section links, in README order."""
    ids = [youtube_id_from_url(link.url) for link in lecture.links if link.kind == "video"]
    return [videos_by_id[video_id] for video_id in dict.fromkeys(ids) if video_id in videos_by_id]


def _contradicted(readme_linked: list[tuple[TalkItem, TalkItem]], matcher: LectureMatcher) -> list[Problem]:
    """README links the matcher would have chosen otherwise, naming both videos."""
    problems = []
    for lecture, linked in readme_linked:
        scored = sorted(matcher.scored(lecture), key=lambda pair: -pair[1][1])
        if scored and scored[0][0] is not linked:
            video, (method, score) = scored[0]
            problems.append(Problem("github", lecture.key, f"lecture {lecture.number or 'bonus'}: the README links "
                                    f"video {linked.key} ('{linked.title}'); the matcher would choose {video.key} "
                                    f"('{video.title}', {method} {score:.0f}); kept the README's",
                                    severity="warning"))
    return problems


def _looks_like_gtc(video: TalkItem) -> bool:
    text = f"{video.series or ''} {video.title} {video.description or ''}".lower()
    return "gtc" in text or "nvidia" in text


def _best(item, candidates, score, allowed):
    best = None
    for candidate in candidates:
        if not allowed(talk_id_for(candidate), item):
            continue
        value = score(candidate)
        if best is None or value > best[1]:
            best = (candidate, value)
    return best
