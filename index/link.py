"""Linking: one talk however many sources mention it.

A GPU MODE lecture from the README is linked to its YouTube video by the
lecture number in the video title *confirmed* by title similarity (numbers
disagree between sources), or by title similarity alone when no number
agrees. A GTC session is linked to its YouTube upload by the On-Demand URL in
the description (certain) or by title, year and speaker similarity. Every
link keeps its method and score; a best candidate below the threshold is left
unlinked and reported. Manual overrides (`config/overrides.toml`) win.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from functools import lru_cache

from rapidfuzz import fuzz

from ..scraper.records import Problem, TalkItem
from ..scraper.titles import fold, parse_lecture_title, without_lecture_prefix
from .overrides import Overrides

# Scores are 0-100.
NUMBER_CONFIRM = 45  # title similarity that confirms an agreeing lecture number
TITLE_ONLY = 88  # title similarity that links without an agreeing number
GTC_LINK = 80  # title (+ year, speaker, abstract) score that links a video to a session
NUMBER_MISMATCH = 30  # taken off a title similarity when the titles' numbers differ
REPORT_BELOW = 50  # best GTC candidates at or above this, but below the bar, are reported

ONDEMAND_RE = re.compile(r"on-demand/session/(?P<slug>[A-Za-z0-9]+-[A-Za-z0-9]+)", re.I)
YEAR_RE = re.compile(r"\b(20\d\d)\b")


@dataclass
class Match:
    source: str
    item_key: str
    talk_id: str
    method: str
    score: float


@dataclass
class TalkCluster:
    talk_id: str
    items: list[TalkItem] = field(default_factory=list)
    matches: list[Match] = field(default_factory=list)

    def add(self, item: TalkItem, method: str, score: float) -> None:
        self.items.append(item)
        self.matches.append(Match(item.source, item.key, self.talk_id, method, round(score, 1)))


@dataclass
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


@lru_cache(maxsize=262144)
def normalise_title(title: str) -> str:
    """Lower-case words only: no 'Lecture N', series tags, event names or punctuation."""
    text = without_lecture_prefix(fold(title))
    text = re.sub(r"\[[^\]]*\]", " ", text)
    text = re.sub(r"\bgtc\b(\s+(spring|fall|digital|san jose))?(\s+20\d\d)?", " ", text)
    text = re.sub(r"[^a-z0-9+]+", " ", text)
    return " ".join(text.split())


def title_similarity(a: str, b: str, strict: bool = False) -> float:
    """token_set_ratio (lenient: subsets score high) or, strict, the best of
    token_sort_ratio and the ratio with spaces removed ("Flash Infer" = "FlashInfer")."""
    na, nb = normalise_title(a), normalise_title(b)
    if not na or not nb:
        return 0.0
    if strict:
        score = max(fuzz.token_sort_ratio(na, nb), fuzz.ratio(na.replace(" ", ""), nb.replace(" ", "")))
    else:
        score = fuzz.token_set_ratio(na, nb)
    # "Scan Algorithm" and "Scan Algorithm Part 2", "X 2024" and "X 2025": numbers tell talks apart.
    if _numbers(na) != _numbers(nb):
        score = max(0.0, score - NUMBER_MISMATCH)
    return score


def _numbers(title: str) -> set[str]:
    return {word for word in title.split() if word.isdigit()}


def speaker_similarity(item: TalkItem, video: TalkItem) -> float:
    """How well the item's speakers appear in the video's title and description."""
    if not item.speakers:
        return 0.0
    haystack = f"{video.title} {video.description or ''}".lower()
    scores = [fuzz.partial_ratio(s.name.lower(), haystack) for s in item.speakers if len(s.name) > 3]
    return max(scores, default=0.0)


def _year_of(item: TalkItem) -> int | None:
    if item.year:
        return item.year
    years = YEAR_RE.findall(item.title or "")
    return int(years[0]) if years else None


def link_talks(items: list[TalkItem], overrides: Overrides | None = None) -> LinkResult:
    """Group items into talks; see the module docstring for the rules."""
    overrides = overrides or Overrides()
    clusters: dict[str, TalkCluster] = {}
    problems: list[Problem] = []
    by_ref = {item_ref(i): i for i in items}

    def cluster(talk_id: str) -> TalkCluster:
        return clusters.setdefault(talk_id, TalkCluster(talk_id))

    lectures = [i for i in items if i.source == "github"]
    sessions = [i for i in items if i.source == "gtc" and not i.from_catalog]
    catalog = [i for i in items if i.source == "gtc" and i.from_catalog]
    videos = [i for i in items if i.source == "youtube"]
    for item in lectures + sessions:
        cluster(talk_id_for(item)).add(item, "source", 100.0)
    session_index = TitleIndex(sessions)

    placed: set[str] = set()
    # 1. Overrides win.
    for ref, talk_id in overrides.same.items():
        if ref in by_ref:
            cluster(talk_id).add(by_ref[ref], "override", 100.0)
            placed.add(ref)

    def allowed(talk_id: str, item: TalkItem) -> bool:
        return (talk_id, item_ref(item)) not in overrides.never and item_ref(item) not in placed

    # 2. Catalog entries join the On-Demand session of the same title and year.
    for entry in catalog:
        if not allowed("", entry):
            continue
        best = _best(entry, session_index.candidates(entry.title),
                     lambda s: _session_score(entry, s, with_abstract=False), allowed)
        if best and best[1] >= TITLE_ONLY:
            cluster(talk_id_for(best[0])).add(entry, "catalog-title", best[1])
        else:
            cluster(talk_id_for(entry)).add(entry, "source", 100.0)
        placed.add(item_ref(entry))

    # 3. A video whose description holds an On-Demand URL is that session.
    session_by_slug = {s.key.lower(): s for s in sessions}
    for video in videos:
        found = ONDEMAND_RE.search(video.description or "")
        if found and found["slug"].lower() in session_by_slug and allowed(
                talk_id_for(session_by_slug[found["slug"].lower()]), video):
            cluster(talk_id_for(session_by_slug[found["slug"].lower()])).add(video, "ondemand-url", 100.0)
            placed.add(item_ref(video))

    # 4. GPU MODE lectures <-> videos: every candidate pair scored, best first,
    #    each lecture and each video used once.
    pairs = []
    taken_talks = {m.talk_id for c in clusters.values() for m in c.matches if m.source == "youtube"}
    open_videos = [v for v in videos if item_ref(v) not in placed]
    by_number: dict[int, list[TalkItem]] = {}
    for video in open_videos:
        if video.number is not None:
            by_number.setdefault(video.number, []).append(video)
    video_index = TitleIndex(open_videos)
    for lecture in lectures:
        talk_id = talk_id_for(lecture)
        if talk_id in taken_talks:
            continue
        candidates = {id(v): v for v in by_number.get(lecture.number, []) if lecture.number is not None}
        candidates.update((id(v), v) for v in video_index.candidates(lecture.title))
        for video in candidates.values():
            if not allowed(talk_id, video):
                continue
            scored = _lecture_score(lecture, video)
            if scored:
                pairs.append((scored[1] + (10 if scored[0] != "title" else 0), scored, lecture, video))
    pairs.sort(key=lambda p: (-p[0], p[2].key, p[3].key))
    linked_lectures: set[str] = set()
    for _, (method, score), lecture, video in pairs:
        if lecture.key in linked_lectures or item_ref(video) in placed:
            continue
        cluster(talk_id_for(lecture)).add(video, method, score)
        linked_lectures.add(lecture.key)
        placed.add(item_ref(video))

    # 5. GTC sessions <-> videos by title, year, speakers, abstract; only for
    #    videos that say they are GTC talks (series, title or description).
    for video in videos:
        if item_ref(video) in placed or not _looks_like_gtc(video):
            continue
        best = _best(video, session_index.candidates(video.title),
                     lambda s: _session_score(s, video, with_abstract=True), allowed)
        if best and best[1] >= GTC_LINK:
            cluster(talk_id_for(best[0])).add(video, "gtc-title", best[1])
            placed.add(item_ref(video))
        elif best and best[1] >= REPORT_BELOW:
            problems.append(Problem("youtube", video.key, f"'{video.title}': best GTC candidate "
                                    f"{best[0].key} scored {best[1]:.0f} < {GTC_LINK}; left unlinked",
                                    severity="unlinked"))

    # 6. Whatever is left is a talk of its own; lectures without a video are reported.
    for video in videos:
        if item_ref(video) not in placed:
            cluster(talk_id_for(video)).add(video, "source", 100.0)
    for lecture in lectures:
        talk_id = talk_id_for(lecture)
        if not any(m.source == "youtube" for m in clusters[talk_id].matches):
            problems.append(Problem("github", lecture.key, f"lecture {lecture.number or 'bonus'} "
                                    f"'{lecture.title}': no YouTube video found", severity="unlinked"))
    return LinkResult(clusters=sorted(clusters.values(), key=lambda c: c.talk_id), problems=problems)


class TitleIndex:
    """Candidate lookup by title words, so matching is not every pair against every pair.

    Items sharing one of a title's rarest keys (in at most `cap` items) are
    its candidates. Keys are the title's words and each pair of adjacent words
    written together, so "Flash Infer" meets "FlashInfer".
    """

    def __init__(self, items: list[TalkItem], rarest: int = 3, cap: int = 500):
        self.rarest, self.cap = rarest, cap
        self.postings: dict[str, list[TalkItem]] = {}
        for item in items:
            for key in self.keys(item.title):
                self.postings.setdefault(key, []).append(item)

    @staticmethod
    def keys(title: str) -> set[str]:
        words = normalise_title(title).split()
        return set(words) | {a + b for a, b in zip(words, words[1:])}

    def candidates(self, title: str) -> list[TalkItem]:
        words = sorted((w for w in self.keys(title) if w in self.postings),
                       key=lambda w: (len(self.postings[w]), w))
        found: dict[int, TalkItem] = {}
        for word in [w for w in words if len(self.postings[w]) <= self.cap][: self.rarest]:
            found.update((id(item), item) for item in self.postings[word])
        return list(found.values())


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


def _lecture_score(lecture: TalkItem, video: TalkItem) -> tuple[str, float] | None:
    """(method, score) when the pair can link; None when it cannot."""
    video_lecture = parse_lecture_title(video.title)
    number = video_lecture.number if video_lecture else None
    bonus_lecture = lecture.number is None
    bonus_video = bool(video_lecture and video_lecture.bonus)
    if bonus_lecture != bonus_video and number is not None:
        return None
    if lecture.number is not None and number == lecture.number:
        similarity = title_similarity(lecture.title, video.title)
        if lecture.title and similarity >= NUMBER_CONFIRM:
            return ("number+title", similarity)
        if speaker_similarity(lecture, video) >= 90:
            return ("number+speaker", 90.0)
        return None
    similarity = title_similarity(lecture.title, video.title, strict=True)
    if lecture.title and similarity >= TITLE_ONLY:
        return ("title", similarity)
    return None


def _session_score(session: TalkItem, other: TalkItem, with_abstract: bool) -> float:
    """Title similarity, penalised for a year that disagrees, raised by a speaker
    named in the video or an identical abstract (the tie-breaker between two
    sessions of the same title in one year)."""
    score = title_similarity(session.title, other.title, strict=False)
    strict = title_similarity(session.title, other.title, strict=True)
    score = (score + strict) / 2
    year_a, year_b = _year_of(session), _year_of(other)
    if year_a and year_b and year_a != year_b:
        score -= 40
    if with_abstract:
        if speaker_similarity(session, other) >= 90:
            score += 5
        if session.description and other.description and fuzz.ratio(
                session.description[:500], other.description[:500]) >= 90:
            score += 10
    return score
