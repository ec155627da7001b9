"""Related talks, ranked once per build for every live talk and stored in `talk_related` (one
row a talk: a JSON list of their ids, best first), so a talk page reads five ids.

A talk is related by a shared speaker (3 each), a lecture within two numbers in its series
(1.5), each shared topic (1), the same event (0.5) and, among the best, a close title (1).
Candidates are bounded: the newest CANDIDATES talks of each topic, speaker and event. Talks
with the same topics and event share their topic and event candidates, ranked once.

The build's worker (`build.py`, `worker.py`) gathers the facts as it merges the talks and
ranks them once it has sent the last, while the writer builds the indexes: 100,000 talks in
about 2.5 s, about as long as the writer's indexes take.
"""

from __future__ import annotations

import json
import re
from json.encoder import encode_basestring_ascii as quoted  # a string as json.dumps writes it
from collections.abc import Iterable, Iterator
from dataclasses import dataclass

import sqlite_utils

from gputalks.index.order import newest_first


RELATED = 5
CANDIDATES = 40  # newest talks of a topic or event: enough to rank five, bounded at any size
SPEAKER_CANDIDATES = 4 * RELATED  # a speaker's newest talks (a shared speaker outweighs the rest)
KEPT = 3 * RELATED  # of a topic-and-event group's candidates, the best kept for each of its talks
# Sort keys: age - BY_SCORE * score orders by score, then newest (ages < 2**24). Scores are halves, so
# two talks' keys differ by a multiple of 2**23 plus their (nonzero) ages' difference: never equal
# under 2**23 talks, so candidates sort by their keys alone.
BY_SCORE = 1 << 24
WEIGHTS = {"topic": 1.0, "event": 0.5, "speaker": 3.0, "neighbour": 1.5, "title": 1.0}
WORD_RE = re.compile(r"[a-z0-9][a-z0-9+#]{2,}")


@dataclass(slots=True)
class TalkFacts:
    """What ranking reads of a talk."""

    id: str
    title: str
    topics: frozenset[str]
    speakers: frozenset[str]
    event: str | None
    series: str | None
    number: int | None
    date: str  # "" when unknown


class Facts(list):
    """The TalkFacts of the talks as they are merged, equal values one object: the build's worker
    holds these for every talk until it has ranked them (40 MiB at 100,000 talks, not 54)."""

    def __init__(self):
        super().__init__()
        self.lists: dict[str, frozenset[str]] = {}
        self.values: dict[str, str] = {}

    def add(self, row: dict) -> None:
        get, lists, values = row.get, self.lists, self.values
        topics, speakers, event, series, date = (get("topics") or "[]", get("speakers") or "[]", get("event"),
                                                 get("series"), get("date") or "")
        if topics not in lists:
            lists[topics] = _names(topics)
        if speakers not in lists:
            lists[speakers] = _names(speakers)
        self.append(TalkFacts(row["id"], get("title") or "", lists[topics], lists[speakers],
                              event if event is None else values.setdefault(event, event),
                              series if series is None else values.setdefault(series, series), get("number"),
                              values.setdefault(date, date)))


def _names(text: str) -> frozenset[str]:
    try:
        found = json.loads(text)
    except ValueError:
        return frozenset()
    return frozenset(name for name in found if isinstance(name, str)) if isinstance(found, list) else frozenset()


def _newest(order: list[int], keys: list[Iterable[str]], cap: int) -> dict[str, list[int]]:
    """Each key's newest `cap` talks (indexes into the facts), newest first."""
    found: dict[str, list[int]] = {}
    for talk in order:
        for key in keys[talk]:
            talks = found.setdefault(key, [])
            if len(talks) < cap:
                talks.append(talk)
    return found


def ranked(facts: list[TalkFacts]) -> Iterator[tuple[str, str]]:
    """(talk id, JSON list of related talk ids, best first) for every talk that has one."""
    order = sorted(range(len(facts)), key=lambda i: newest_first(facts[i].date, facts[i].id))
    age = [0] * len(facts)  # newest first: ties go to the newer talk
    for position, talk in enumerate(order):
        age[talk] = position
    topics = [f.topics for f in facts]
    overlap = _topic_masks(topics)  # shared topics counted as bits: a set intersection costs 3x more
    speakers = [f.speakers for f in facts]
    events = [f.event for f in facts]
    words = _TitleWords(facts)  # a candidate's, kept: candidates are a few thousand talks
    by_topic, by_speaker = _newest(order, topics, CANDIDATES), _newest(order, speakers, SPEAKER_CANDIDATES)
    by_event = _newest(order, [(event,) if event else () for event in events], CANDIDATES)
    by_number: dict[tuple[str, int], list[int]] = {}
    for talk, f in enumerate(facts):
        if f.series is not None and f.number is not None:
            by_number.setdefault((f.series, f.number), []).append(talk)
    grouped: dict[tuple[frozenset[str], str | None], list[tuple[float, int]]] = {}
    topic, event, speaker, neighbour, title = (BY_SCORE * WEIGHTS[k] for k in ("topic", "event", "speaker",
                                                                              "neighbour", "title"))

    def group(talk: int) -> list[tuple[float, int]]:
        """(sort key, talk) of the best of the talk's topic and event candidates, best first,
        shared by every talk of the same topics and event. A candidate counts each of the
        talk's topics whose newest talks it is among."""
        key = (topics[talk], events[talk])
        if key not in grouped:
            keys: dict[int, float] = {}
            for name in topics[talk]:
                for c in by_topic[name]:
                    keys[c] = keys.get(c, age[c]) - topic
            for c in by_event.get(events[talk], ()) if events[talk] else ():
                keys[c] = keys.get(c, age[c]) - event
            grouped[key] = [(keys[c], c) for c in sorted(keys, key=keys.__getitem__)[:KEPT + 1]]  # +1: itself
        return grouped[key]

    for talk, f in enumerate(facts):
        numbered = f.series is not None and f.number is not None
        if not speakers[talk] and not numbered:  # a group's ranking is the talk's own
            best = [pair for pair in group(talk) if pair[1] != talk][:2 * RELATED]
        else:
            keys = {c: rank for rank, c in group(talk)}
            mine, at = overlap[talk], events[talk]
            others = [(c, speaker) for name in speakers[talk] for c in by_speaker[name]]
            if numbered:
                others += [(c, neighbour) for number in range(f.number - 2, f.number + 3)
                           for c in by_number.get((f.series, number), ())]
            for c, weight in others:  # each speaker shared adds (among their newest talks)
                if c not in keys:
                    keys[c] = age[c] - topic * (mine & overlap[c]).bit_count() - (event if at and at == events[c] else 0)
                keys[c] -= weight
            keys.pop(talk, None)
            best = [(keys[c], c) for c in sorted(keys, key=keys.__getitem__)[:2 * RELATED]]
        if not best:
            continue
        mine, rescored = words.of(talk), []
        for rank, c in best:  # a close title: at least two words shared, half the shorter title's
            theirs = words[c]
            shared = len(mine & theirs)
            rescored.append((rank - title if shared >= 2 and 2 * shared >= min(len(mine), len(theirs)) else rank, c))
        rescored.sort()
        yield f.id, "[" + ", ".join([quoted(facts[c].id) for _, c in rescored[:RELATED]]) + "]"  # json.dumps


def _topic_masks(topics: list[frozenset[str]]) -> list[int]:
    """Each talk's topics as the bits of an int, one bit a topic name."""
    bits: dict[str, int] = {}
    masks: dict[frozenset[str], int] = {}
    for names in topics:
        if names not in masks:
            masks[names] = sum(1 << bits.setdefault(name, len(bits)) for name in names)
    return [masks[names] for names in topics]


class _TitleWords(dict):
    """A talk's title words, kept once asked for as a candidate's (each word one string)."""

    def __init__(self, facts: list[TalkFacts]):
        super().__init__()
        self.facts, self.known = facts, {}

    def of(self, talk: int) -> frozenset[str]:
        found = self.get(talk)
        return found if found is not None else frozenset(
            self.known.setdefault(word, word) for word in WORD_RE.findall(self.facts[talk].title.lower()))

    def __missing__(self, talk: int) -> frozenset[str]:
        self[talk] = found = self.of(talk)
        return found


def write_related(db: sqlite_utils.Database, rows: Iterable[tuple[str, str]], keep: bool = False) -> None:
    """The ranked talks' related talks, in place of the last build's. `keep` (the archive was
    missing: talks this build did not make are kept, not gone): theirs stay too. Inside the
    build's transaction."""
    if not keep:
        db.execute("delete from talk_related")
    db.conn.executemany("insert or replace into talk_related (talk_id, related) values (?, ?)", rows)
