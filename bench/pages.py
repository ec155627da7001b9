"""What readers click, as URLs drawn from the index: for each kind of page, a list of URLs no
request repeats (filters and their combinations, "Next" pages in the default order, sorted
pages, searches, talk/speaker/topic pages, canned queries with parameters, JSON and CSV
exports, feeds), each with the URL bare Datasette answers with the same work and page size.

A kind of page whose distinct URLs are few (16 topics) tells them apart with a parameter no
server reads (`_n=`), so no cache anywhere answers a request from an earlier one.
"""

from __future__ import annotations

import itertools
import json
import random
import sqlite3
from dataclasses import dataclass
from pathlib import Path
from urllib.parse import quote, urlencode

from datasette.utils import tilde_encode

from bench.generate import WORDS

# The facets `gputalks serve` shows by default, asked of bare Datasette by URL.
SAME_FACETS = [("_facet", "series"), ("_facet", "event"), ("_facet", "year"), ("_facet_array", "speakers"),
               ("_facet_array", "sources"), ("_facet", "duration_bucket"), ("_facet_array", "topics")]
PAGE_SIZE = 50  # gputalks' default_page_size; bare Datasette is served with the same settings
# A topic's feed as bare Datasette (with datasette-atom) answers it: the newest 50 of the topic.
TOPIC_FEED = ("select 'gputalks:talk:' || t.id as atom_id, t.title as atom_title, t.first_seen as atom_updated, "
              "coalesce(t.url, '') as atom_link, coalesce(t.speaker_names, '') as atom_author_name, "
              "coalesce(t.description, '') as atom_content from talks t where t.rowid in (select talks.rowid "
              "from talks, json_each(talks.topics) j where j.value = :topic) and t.gone_since is null "
              "order by t.date is null, t.date desc, t.first_seen desc limit 50")
# A series' or a speaker's feed, the same way: the newest 50 of the series or of the speaker.
SERIES_FEED = TOPIC_FEED.replace("from talks, json_each(talks.topics) j where j.value = :topic",
                                 "from talks where talks.series = :series")
SPEAKER_FEED = TOPIC_FEED.replace("json_each(talks.topics) j where j.value = :topic",
                                  "json_each(talks.speakers) j where j.value = :speaker")
# How a reader asks a question: the content words in a sentence (bare Datasette gets the words alone).
QUESTIONS = ["how do i {} {} on a gpu?", "what is the best way to {} {}", "why is my {} so {}",
             "comment faire {} avec {} ?", "when should i use {} for {}"]
LONG_QUERY_WORDS = 20  # a reader pasting a sentence of their own (the search answers up to 32 words)


@dataclass(frozen=True)
class PageKind:
    name: str
    ours: list[str]
    bare: list[str]
    reader: bool = False  # a reader page: p95 <= 300 ms at 8 clients is its target too


@dataclass(frozen=True)
class Facts:
    """What the URLs are drawn from."""

    series: list[str]
    events: list[str]
    years: list[int]
    topics: list[str]
    speakers: list[str]  # names, the most frequent first
    speaker_keys: list[str]  # their ids, in the same order (a speaker's feed is by id)
    speaker_ids: list[str]
    talk_ids: list[str]
    next_tokens: list[tuple[str, str]]  # the same page's token (ours, bare's): each in its own default order

    @classmethod
    def of(cls, db_path: Path, seed: int = 7) -> "Facts":
        rng = random.Random(seed)
        with sqlite3.connect(db_path) as db:
            def column(sql: str) -> list:
                return [row[0] for row in db.execute(sql)]

            talk_ids = column("select id from talks where gone_since is null")
            rng.shuffle(talk_ids)
            frequent = db.execute("select s.name, s.id from speakers s join talk_speakers ts on ts.speaker_id = s.id "
                                  "group by s.id order by count(*) desc limit 400").fetchall()
            speakers, speaker_keys = [name for name, _ in frequent], [key for _, key in frequent]
            speaker_ids = column("select id from speakers")
            rng.shuffle(speaker_ids)
            # Each server's default order, as Datasette's keyset pages walk it: ours by its sort
            # column then the id, bare Datasette's by the primary key.
            ours = db.execute("select newest_first, id from talks order by newest_first, id").fetchall()
            bare = column("select id from talks order by id")
        tokens = [(tilde_encode(key) + "," + tilde_encode(talk_id), tilde_encode(bare_id)) for (key, talk_id), bare_id
                  in zip(ours[PAGE_SIZE - 1::PAGE_SIZE], bare[PAGE_SIZE - 1::PAGE_SIZE])]
        with sqlite3.connect(db_path) as db:
            series = [row[0] for row in db.execute("select distinct series from talks where series is not null")]
            events = [row[0] for row in db.execute("select distinct event from talks where event is not null")]
            years = [row[0] for row in db.execute("select distinct year from talks where year is not null")]
            topics = [row[0] for row in db.execute("select value from talk_facet_values where facet = 'topics'")]
        return cls(series, events, years, topics, speakers, speaker_keys, speaker_ids, talk_ids, tokens)


def filter_combinations(facts: Facts, rng: random.Random) -> list[list[tuple[str, str]]]:
    """Combinations of two or three of series, year, topic and speaker, in random order."""
    choices = {"series": facts.series, "year": [str(y) for y in facts.years], "topic": facts.topics,
               "speaker": facts.speakers[:60]}
    combos = []
    for names in itertools.chain(itertools.combinations(choices, 2), itertools.combinations(choices, 3)):
        for values in itertools.product(*(choices[name] for name in names)):
            combos.append(list(zip(names, values)))
    rng.shuffle(combos)
    return combos


def as_filters(combo: list[tuple[str, str]], ours: bool) -> list[tuple[str, str]]:
    """A reader's filter as each server takes it: gputalks' facet links select a topic or a speaker
    with `_item_`, bare Datasette's with `__arraycontains`."""
    names = {"topic": ("_item_topics", "topics__arraycontains"), "speaker": ("_item_speakers", "speakers__arraycontains")}
    return [(names[kind][0 if ours else 1] if kind in names else kind, value) for kind, value in combo]


def canned_sql(name: str) -> str:
    metadata = json.loads((Path(__file__).resolve().parent.parent / "gputalks" / "metadata.json").read_text())
    return metadata["databases"]["talks"]["queries"][name]["sql"]


def misspelt(word: str, rng: random.Random) -> str:
    """The word as a hurried reader types it: two neighbouring letters swapped, or one left out."""
    at = rng.randrange(1, len(word) - 1)
    if rng.random() < 0.5:
        return word[:at] + word[at + 1] + word[at] + word[at + 2:]
    return word[:at] + word[at + 1:]


def page_kinds(db_path: Path, count: int, seed: int = 7) -> list[PageKind]:
    """Every kind of page with `count` distinct URLs on each server."""
    facts, rng = Facts.of(db_path), random.Random(seed)
    db, table = db_path.stem, f"/{db_path.stem}/talks"
    combos = iter(filter_combinations(facts, rng))

    def combos_for(n: int) -> list[list[tuple[str, str]]]:
        return [next(combos) for _ in range(n)]

    def both(path: str, ours: list, bare: list) -> tuple[str, str]:
        return f"{path}?{urlencode(ours)}", f"{path}?{urlencode(bare)}"

    def kind(name: str, pairs: list[tuple[str, str]], reader: bool = False) -> PageKind:
        return PageKind(name, [p[0] for p in pairs], [p[1] for p in pairs], reader)

    words = sorted({w for w in WORDS if len(w) > 3})
    pairs_of_words = [f"{a} {b}" for a, b in itertools.combinations(words, 2)]
    rng.shuffle(pairs_of_words)
    misspelt_pairs = [(f"{pair.split()[0]} {misspelt(pair.split()[1], rng)}", pair)
                      for pair in pairs_of_words[3 * count:4 * count]]
    long_queries = [" ".join(rng.sample(words, LONG_QUERY_WORDS)) for _ in range(count)]
    by_speaker, of_series = canned_sql("talks_by_speaker"), canned_sql("longest_talks_of_series")
    new_talks, talk_updates = canned_sql("new_talks"), canned_sql("talk_updates")
    groups = [("series", s) for s in facts.series] + [("event", e) for e in facts.events]
    n = range(count)
    kinds = [
        kind("filters", [both(table, as_filters(c, True), as_filters(c, False)) for c in combos_for(count)], True),
        kind("filters, bare with the same 7 facets",
             [both(table, as_filters(c, True), as_filters(c, False) + SAME_FACETS) for c in combos_for(count)], True),
        kind("filters + _facet=level", [both(table, as_filters(c, True) + [("_facet", "level")],
                                             as_filters(c, False) + [("_facet", "level")]) for c in combos_for(count)],
             True),
        # what API clients send: Datasette's own array filters on both servers
        kind("filters as API clients send them (__arraycontains)",
             [both(table, as_filters(c, False), as_filters(c, False)) for c in combos_for(count)], True),
        kind("Next pages in the default order",
             [both(table, [("_next", ours)], [("_next", bare)]) for ours, bare in rng.sample(facts.next_tokens, count)],
             True),
        # the longest first: ours by its key (index/order.py), bare Datasette by the column
        kind("sorted pages", [both(table, as_filters(c[:1], True) + [("_sort", "longest_first")],
                                   as_filters(c[:1], False) + [("_sort_desc", "duration_s")])
                              for c in combos_for(count)], True),
        kind("ranked search /search (bare: table search)",
             [(f"/search?q={quote(q)}", f"{table}?_search={quote(q)}") for q in pairs_of_words[:count]], True),
        kind("questions /search (bare: table search of their content words)",
             [(f"/search?q={quote(QUESTIONS[i % len(QUESTIONS)].format(*pair.split()))}", f"{table}?_search={quote(pair)}")
              for i, pair in enumerate(pairs_of_words[2 * count:3 * count])], True),
        # bare Datasette finds nothing for a misspelt word: it gets the words as the reader meant them
        kind("misspelt words /search (bare: table search of the words spelt right)",
             [(f"/search?q={quote(typed)}", f"{table}?_search={quote(meant)}") for typed, meant in misspelt_pairs], True),
        # nor for 20 words all required: it gets any of them, ranked, as the search's last tier asks
        kind("20-word queries /search (bare: table search of any of the words)",
             [(f"/search?q={quote(q)}", f"{table}?{urlencode({'_search': ' OR '.join(q.split()), '_searchmode': 'raw'})}")
              for q in long_queries], True),
        kind("table search", [both(table, [("_search", q)], [("_search", q)])
                              for q in pairs_of_words[count:2 * count]]),
        kind("talk page", [(f"{table}/{t}", f"{table}/{t}") for t in facts.talk_ids[:count]], True),
        kind("speaker page", [(f"/{db}/speakers/{s}", f"/{db}/speakers/{s}") for s in facts.speaker_ids[:count]],
             True),
        kind("topic page (bare: the table filtered)",
             [(f"/topic/{quote(facts.topics[i % len(facts.topics)], safe='')}?_n={i}",
               f"{table}?{urlencode([('topics__arraycontains', facts.topics[i % len(facts.topics)]), ('_n', i)])}")
              for i in n], True),
        kind("series and event pages (bare: the table filtered)",
             [(f"/{group}/{quote(name, safe='')}?_n={i}", f"{table}?{urlencode([(group, name), ('_n', i)])}")
              for i, (group, name) in zip(n, itertools.cycle(groups))], True),
        # the two queries taken in turn, so that each number of clients asks for both
        kind("canned query with a parameter", [pair for pairs in itertools.zip_longest(
             [(f"/{db}/talks_by_speaker?{urlencode({'speaker': s})}", f"/{db}?{urlencode({'sql': by_speaker, 'speaker': s})}")
              for s in facts.speakers[:count // 2]],
             [(f"/{db}/longest_talks_of_series?{urlencode({'series': s, '_n': i})}",
               f"/{db}?{urlencode({'sql': of_series, 'series': s, '_n': i})}")
              for i, s in enumerate(itertools.islice(itertools.cycle(facts.series), count - count // 2))])
             for pair in pairs if pair], True),
        kind("JSON export", [both(table + ".json", as_filters(c, True) + [("_shape", "array")],
                                  as_filters(c, False) + [("_shape", "array")]) for c in combos_for(count)]),
        kind("CSV export", [both(table + ".csv", as_filters(c, True), as_filters(c, False)) for c in combos_for(count)]),
        kind("Atom feeds (new talks, topics)",
             [(f"/{db}/new_talks.atom?_n={i}", f"/{db}.atom?{urlencode({'sql': new_talks, '_n': i})}")
              if i % 2 else (f"/topic/{quote(facts.topics[i % len(facts.topics)], safe='')}.atom?_n={i}",
                             f"/{db}.atom?{urlencode({'sql': TOPIC_FEED, 'topic': facts.topics[i % len(facts.topics)], '_n': i})}")
              for i in n], True),
        kind("Atom feeds (talk updates, series, speakers)",
             [(f"/{db}/talk_updates.atom?_n={i}", f"/{db}.atom?{urlencode({'sql': talk_updates, '_n': i})}")
              if i % 3 == 0 else
              (f"/series/{quote(facts.series[i % len(facts.series)], safe='')}.atom?_n={i}",
               f"/{db}.atom?{urlencode({'sql': SERIES_FEED, 'series': facts.series[i % len(facts.series)], '_n': i})}")
              if i % 3 == 1 else
              (f"/speaker/{quote(facts.speaker_keys[i % len(facts.speakers)], safe='')}.atom?_n={i}",
               f"/{db}.atom?{urlencode({'sql': SPEAKER_FEED, 'speaker': facts.speakers[i % len(facts.speakers)], '_n': i})}")
              for i in n], True),
    ]
    short = [k.name for k in kinds if min(len(k.ours), len(k.bare)) < count]
    if short:
        raise ValueError(f"fewer than {count} distinct URLs for: {', '.join(short)}")
    return kinds
