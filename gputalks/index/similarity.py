"""How alike two items are: title, speaker and year similarity, the scores
that decide a link, and candidate lookup so not every pair is compared.

Scores are 0-100. `link.py` decides with them.
"""

from __future__ import annotations

import operator
import re
from collections.abc import Iterable
from functools import lru_cache

from rapidfuzz import fuzz

from gputalks.scraper.records import TalkItem
from gputalks.scraper.titles import fold, parse_lecture_title, without_lecture_prefix

NUMBER_CONFIRM = 45  # title similarity that confirms an agreeing lecture number
TITLE_ONLY = 88  # title similarity that links without an agreeing number
NUMBER_MISMATCH = 30  # taken off a title similarity when the titles' numbers differ
YEAR_MISMATCH = 40  # taken off a session score when the two years are known and differ
YEAR_RE = re.compile(r"\b(20\d\d)\b")
TITLE_WORD_RE = re.compile(r"[a-z0-9+]+")
BRACKETED_RE = re.compile(r"\[[^\]]*\]")
GTC_EVENT_RE = re.compile(r"\bgtc\b(\s+(spring|fall|digital|san jose))?(\s+20\d\d)?")


@lru_cache(maxsize=262144)
def normalise_title(title: str) -> str:
    """Lower-case words only: no 'Lecture N', series tags, event names or punctuation."""
    text = without_lecture_prefix(fold(title))
    if "[" in text:  # a substring test skips each pattern for most titles
        text = BRACKETED_RE.sub(" ", text)
    if "gtc" in text:
        text = GTC_EVENT_RE.sub(" ", text)
    return " ".join(TITLE_WORD_RE.findall(text))


def forget_titles() -> None:
    """Let go of the titles cached while linking: a few hundred bytes a talk, which a
    build's writing has better use for."""
    normalise_title.cache_clear()


def title_similarity(a: str, b: str, strict: bool = False) -> float:
    """token_set_ratio (lenient: subsets score high) or, strict, the best of
    token_sort_ratio and the ratio with spaces removed ("Flash Infer" = "FlashInfer")."""
    na, nb, penalty = _normalised(a, b)
    if not na or not nb:
        return 0.0
    return max(0.0, (_strict_ratio(na, nb) if strict else fuzz.token_set_ratio(na, nb)) - penalty)


def mean_title_similarity(a: str, b: str) -> float:
    """The mean of the lenient and the strict title_similarity, the titles normalised once."""
    na, nb, penalty = _normalised(a, b)
    if not na or not nb:
        return 0.0
    return (max(0.0, fuzz.token_set_ratio(na, nb) - penalty) + max(0.0, _strict_ratio(na, nb) - penalty)) / 2


def _normalised(a: str, b: str) -> tuple[str, str, float]:
    """Both titles normalised, and what is taken off their similarity: "Scan Algorithm" and
    "Scan Algorithm Part 2", "X 2024" and "X 2025": numbers tell talks apart."""
    na, nb = normalise_title(a), normalise_title(b)
    return na, nb, (NUMBER_MISMATCH if na and nb and _numbers(na) != _numbers(nb) else 0.0)


def _strict_ratio(na: str, nb: str) -> float:
    return max(fuzz.token_sort_ratio(na, nb), fuzz.ratio(na.replace(" ", ""), nb.replace(" ", "")))


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


def years_differ(a: TalkItem, b: TalkItem) -> bool:
    """Both items' years are known, and they are not the same."""
    year_a, year_b = _year_of(a), _year_of(b)
    return bool(year_a and year_b and year_a != year_b)


class TitleIndex:
    """Candidate lookup by title words, so matching is not every pair against every pair.

    Items sharing one of a title's rarest keys (in at most `cap` items) are
    its candidates. Keys are the title's words and each pair of adjacent words
    written together, so "Flash Infer" meets "FlashInfer".

    Given the titles it will be asked about (`asked`), it holds only their keys: each
    with every item that has it, so their candidates are those of the whole index, for
    a fraction of its memory and time (most keys, pairs of words above all, are one
    title's alone and never asked about). Asking about another title is a ValueError.
    """

    def __init__(self, items: list[TalkItem], asked: Iterable[str] | None = None, rarest: int = 3,
                 cap: int = 500):
        self.rarest, self.cap = rarest, cap
        self.asked: set[str] | None = None if asked is None else {k for t in asked for k in self.keys(t)}
        # A key's items: most keys are one title's alone, held as the item itself; a list for
        # each would be most of the index (40 MiB of 100,000 talks' items).
        self.postings: dict[str, TalkItem | list[TalkItem]] = {}
        postings = self.postings
        for item in items:
            for key in self._keys_of(item.title):
                posted = postings.setdefault(key, item)
                if posted is not item:
                    if type(posted) is list:
                        posted.append(item)
                    else:
                        postings[key] = [posted, item]

    def posted(self, key: str) -> list[TalkItem]:
        """The items of a key in the index, as a list however they are held."""
        posted = self.postings[key]
        return posted if type(posted) is list else [posted]

    @staticmethod
    def keys(title: str) -> set[str]:
        words = normalise_title(title).split()
        return set(words) | {a + b for a, b in zip(words, words[1:])}

    def without(self, dropped: list[TalkItem]) -> "TitleIndex":
        """The index these items less `dropped` would make (in the same order, so the same
        candidates), without reading every title again: only the dropped items' keys change."""
        index = TitleIndex([], rarest=self.rarest, cap=self.cap)
        index.asked = self.asked
        index.postings = dict(self.postings)  # shared: postings are never changed
        gone = {id(item) for item in dropped}
        for key in {key for item in dropped for key in self._keys_of(item.title)}:
            if key in index.postings:
                kept = [item for item in self.posted(key) if id(item) not in gone]
                if kept:
                    index.postings[key] = kept if len(kept) > 1 else kept[0]
                else:
                    del index.postings[key]
        return index

    def _keys_of(self, title: str) -> set[str]:
        return self.keys(title) if self.asked is None else _asked_keys(title, self.asked)

    def candidates(self, title: str) -> list[TalkItem]:
        keys = self.keys(title)
        if self.asked is not None and not keys <= self.asked:
            raise ValueError(f"the title index was not built to be asked about {title!r}")
        posted = {w: self.posted(w) for w in keys if w in self.postings}
        words = sorted(posted, key=lambda w: (len(posted[w]), w))
        found: dict[int, TalkItem] = {}
        for word in [w for w in words if len(posted[w]) <= self.cap][: self.rarest]:
            found.update((id(item), item) for item in posted[word])
        return list(found.values())


def _asked_keys(title: str, asked: set[str]) -> set[str]:
    """`TitleIndex.keys(title) & asked`, without making every pair of words (a third faster)."""
    words = normalise_title(title).split()
    found = asked.intersection(words)
    found.update(asked.intersection(map(operator.add, words, words[1:])))
    return found


class LectureMatcher:
    """Candidate videos for a lecture: those with its number, and those sharing a rare title word.
    Built for the lectures it will be asked about (`TitleIndex`)."""

    def __init__(self, videos: list[TalkItem], lectures: list[TalkItem] | None = None):
        self.by_number: dict[int, list[TalkItem]] = {}
        for video in videos:
            if video.number is not None:
                self.by_number.setdefault(video.number, []).append(video)
        self.index = TitleIndex(videos, None if lectures is None else [lecture.title for lecture in lectures])

    def without(self, videos: list[TalkItem]) -> "LectureMatcher":
        """The matcher of the other videos: what building it from them would give, for less."""
        dropped = {id(video) for video in videos}
        matcher = LectureMatcher([])
        matcher.by_number = {number: kept for number, found in self.by_number.items()
                             if (kept := [v for v in found if id(v) not in dropped])}
        matcher.index = self.index.without(videos)
        return matcher

    def scored(self, lecture: TalkItem) -> list[tuple[TalkItem, tuple[str, float]]]:
        """(video, (method, score)) for every candidate that can link."""
        candidates = {id(v): v for v in self.by_number.get(lecture.number, []) if lecture.number is not None}
        candidates.update((id(v), v) for v in self.index.candidates(lecture.title))
        return [(video, scored) for video in candidates.values()
                if (scored := lecture_score(lecture, video)) is not None]


def lecture_score(lecture: TalkItem, video: TalkItem) -> tuple[str, float] | None:
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


def session_score(session: TalkItem, other: TalkItem, with_abstract: bool) -> float:
    """Title similarity, penalised for a year that disagrees, raised by a speaker
    named in the video or an identical abstract (the tie-breaker between two
    sessions of the same title in one year)."""
    score = mean_title_similarity(session.title, other.title)
    if years_differ(session, other):
        score -= YEAR_MISMATCH
    if with_abstract:
        if speaker_similarity(session, other) >= 90:
            score += 5
        if session.description and other.description and fuzz.ratio(
                session.description[:500], other.description[:500]) >= 90:
            score += 10
    return score
