"""`gputalks publish pages`: the index as static HTML beside a docs site, no server needed.

One page per talk, speaker, topic and series, a home page and a search page whose search runs
in the reader's browser (Pagefind, from the `pagefind[bin]` wheel: it indexes the pages and
writes its bundle under `pagefind/`). Every link is relative, so the site works under any
sub-path of a docs site (`https://docs.example.org/talks/`). Scraped text is escaped by the
templates (autoescape) and descriptions are rendered as the served talk pages render them.
"""

from __future__ import annotations

import json
import math
import os
import re
import shutil
import sqlite3
import subprocess
import sys
from collections import defaultdict
from dataclasses import dataclass
from pathlib import Path

import sqlite_utils
from jinja2 import Environment, FileSystemLoader, select_autoescape

from gputalks.durations import human_duration
from gputalks.site.markdown import render_markdown  # the served pages' rendering
from gputalks.search.vocabulary import browser_vocabulary
from gputalks.search.words import tokens
from gputalks.site.related import labelled_links, neighbours, related_talks
from gputalks.site.outputs import check_output_dir, replacing_dir

STATIC_TEMPLATES = Path(__file__).parent / "templates"
# Pagefind holds the index it builds in memory (630 MiB for 10,000 of the benchmark's talk pages;
# 3.6 GiB for 100k in one index). Above this many talk pages the search is written as several
# indexes of at most this many, each by its own Pagefind process, and the search page merges
# them (Pagefind's `mergeIndex`): `publish pages` of 100k talks then stays under 1 GiB.
PAGES_PER_INDEX = 5_000


@dataclass(frozen=True)
class SiteReport:
    pages: int
    talks: int
    out: Path


def slug(text: str) -> str:
    """A file name for a name: readable, the same name always the same file, and nothing a URL
    would encode ("Reductions, scans and algorithms" -> "reductions-scans-and-algorithms")."""
    return re.sub(r"[^a-z0-9._-]+", "-", text.lower()).strip("-") or "-"


def _environment() -> Environment:
    env = Environment(loader=FileSystemLoader(str(STATIC_TEMPLATES)), autoescape=select_autoescape(["html"]))
    env.filters["duration"] = lambda seconds: human_duration(seconds) if seconds else ""
    env.filters["slug"] = slug
    env.filters["words"] = lambda text: " ".join(tokens(text or ""))  # safe in a Pagefind meta value
    env.globals["markdown"] = render_markdown
    return env


def _talks(db: sqlite_utils.Database) -> list[dict]:
    rows = list(db.query("select id, title, series, event, year, number, date, duration_s, description, speakers, "
                         "topics, youtube_id, url, search_terms, search_labels, folder_words from talks where gone_since is null "
                         "order by newest_first"))
    for row in rows:
        row["speakers"] = json.loads(row["speakers"] or "[]")
        row["topics"] = json.loads(row["topics"] or "[]")
    return rows


def search_bundles(talks: int, pages_per_index: int = PAGES_PER_INDEX) -> list[str]:
    """The folders of the search's indexes: `pagefind`, then `pagefind-2`... past one index's pages."""
    return ["pagefind"] + [f"pagefind-{n}" for n in range(2, math.ceil(talks / pages_per_index) + 1)]


def build_site(db_path: Path, out: Path, project_root: Path | None = None,
               pages_per_index: int = PAGES_PER_INDEX) -> SiteReport:
    """Write the site into `out`: written beside it, then moved in whole, and only over a
    folder gputalks wrote (outputs.replacing_dir); a refused `out` is refused before any work."""
    check_output_dir(out, project_root)
    db = sqlite_utils.Database(sqlite3.connect(f"file:{db_path}?mode=ro", uri=True))
    talks = _talks(db)
    links = defaultdict(list)
    for row in db.query("select talk_id, kind, url from links where kind != 'video' order by kind, url"):
        if str(row["url"]).startswith(("https://", "http://")):
            links[row["talk_id"]].append(row)
    speaker_ids = dict(db.execute("select name, id from speakers").fetchall())
    groups: dict[str, dict[str, list[dict]]] = {"speakers": defaultdict(list), "topics": defaultdict(list),
                                                "series": defaultdict(list)}
    for talk in talks:
        for name in talk["speakers"]:
            groups["speakers"][name].append(talk)
        for topic in talk["topics"]:
            groups["topics"][topic].append(talk)
        if talk["series"]:
            groups["series"][talk["series"]].append(talk)
    env = _environment()
    pages = 0

    def write(path: str, template: str, **context) -> None:
        nonlocal pages
        target = work / path
        target.parent.mkdir(parents=True, exist_ok=True)
        root = "../" * path.count("/")
        target.write_text(env.get_template(template).render(root=root, **context), encoding="utf-8")
        pages += 1

    with replacing_dir(out, project_root) as work:
        for talk in talks:
            write(f"talks/{slug(talk['id'])}.html", "talk.html", talk=talk,
                  links=labelled_links(links.get(talk["id"], [])), speaker_ids=speaker_ids,
                  around=neighbours(db.conn, talk), related=related_talks(db.conn, talk["id"])[:8])
        for kind, by_name in groups.items():
            for name, members in by_name.items():
                write(f"{kind}/{slug(name)}.html", "group.html", kind=kind, name=name, talks=members,
                      total=human_duration(sum(t["duration_s"] or 0 for t in members)),
                      timed=sum(1 for t in members if t["duration_s"]))
        write("index.html", "index.html", talks=talks[:20], count=len(talks),
              topics=sorted(((name, len(m)) for name, m in groups["topics"].items()), key=lambda p: -p[1]),
              series=sorted(((name, len(m)) for name, m in groups["series"].items()), key=lambda p: -p[1]))
        bundles = search_bundles(len(talks), pages_per_index)
        write("search.html", "search.html", merged=bundles[1:])
        for script in ("search.js", "bm25.js", "stemmer.js"):
            (work / script).write_text((STATIC_TEMPLATES / script).read_text(encoding="utf-8"), encoding="utf-8")
        (work / "search-vocabulary.json").write_text(json.dumps(browser_vocabulary(db.conn), ensure_ascii=False),
                                                     encoding="utf-8")
        db.close()
        index_search(work, [work / "talks" / f"{slug(talk['id'])}.html" for talk in talks], bundles)
    return SiteReport(pages, len(talks), out)


def index_search(site: Path, talk_pages: list[Path], bundles: list[str]) -> None:
    """Pagefind's index of the talk pages (the `data-pagefind-body` of each), in `pagefind/`; past
    one index's pages, each bundle indexes its share of them from a folder of hard links."""
    if len(bundles) == 1:
        return _pagefind("--site", str(site))
    share = math.ceil(len(talk_pages) / len(bundles))
    batch = site / ".pagefind-batch"
    for n, bundle in enumerate(bundles):
        (batch / "talks").mkdir(parents=True)
        for page in talk_pages[n * share:(n + 1) * share]:
            os.link(page, batch / "talks" / page.name)
        try:
            _pagefind("--site", str(batch), "--output-path", str(site / bundle))
        finally:
            shutil.rmtree(batch)


def _pagefind(*args: str) -> None:
    done = subprocess.run([sys.executable, "-m", "pagefind", *args], capture_output=True, text=True)
    if done.returncode != 0:
        last = (done.stderr or done.stdout).strip().splitlines()[-1:] or ["no message"]
        raise RuntimeError(f"pagefind could not index the pages: {last[0]}")
