"""The talks sort by keys never tied (index/order.py), every other table by its unique columns, so
Datasette's "Next" links and CSV streams meet every row once however a list is sorted; a column
with ties does not sort."""

import re
import sqlite3
from pathlib import Path

import httpx
import pytest
import sqlite_utils

from gputalks.index.history import apply_talks
from gputalks.index.link import TalkCluster
from gputalks.index.merge import merge_talk
from gputalks.index.order import SORT_KEYS, alphabetical, longest_first
from gputalks.index.runs import start_run
from gputalks.index.schema import ensure_schema
from gputalks.index.store import open_db
from gputalks.scraper.records import TalkItem

from tests.test_default_order import get
from tests.conftest import gputalks_serve


def walk(ds, query: str) -> list[str]:
    """The ids of every page of `query`, 7 talks a page, following each page's next_url."""
    path, ids = f"/talks/talks.json?_size=7&_shape=objects&_col=title&{query}", []
    while path:
        page = get(ds, path).json()
        ids += [row["id"] for row in page["rows"]]
        path = page["next_url"] and page["next_url"].split("localhost", 1)[-1]
    return ids


@pytest.mark.parametrize("key", sorted(SORT_KEYS.values()))
def test_every_sort_pages_through_each_talk_once_in_its_keys_order(ds, snapshot_db, key):
    """Both ways, by 7s. Under the columns themselves, on this snapshot, a walk by 50s met 50 of
    the 150 talks sorted by event descending, 105 by series descending (and 191 rows, 147 talks,
    ascending)."""
    ascending = [row[0] for row in snapshot_db.execute(f"select id from talks order by {key}")]
    assert len(ascending) == 150 and len(set(row[0] for row in snapshot_db.execute(f"select {key} from talks"))) == 150
    assert walk(ds, f"_sort={key}") == ascending
    assert walk(ds, f"_sort_desc={key}") == ascending[::-1]


@pytest.mark.parametrize("query", ["_sort=event", "_sort_desc=series", "_sort_desc=date", "_sort=duration_s",
                                   "_sort=title", "_sort=speakers"])
def test_a_column_with_ties_does_not_sort(ds, query):
    response = get(ds, f"/talks/talks.json?{query}")
    assert response.status_code == 400 and response.json()["error"] == (
        f"Cannot sort table by {query.split('=')[1]}; the talks sort by newest_first (date), longest_first (duration_s), "
        "alphabetical (title), which page without skipping a row")


def test_the_keys_sort_the_longest_first_and_the_titles_from_a():
    durations = [(3000, "b"), (None, "a"), (15926, "z"), (3000, "a"), (0, "c"), (None, "0")]
    assert sorted(durations, key=lambda d: longest_first(*d)) == [
        (15926, "z"), (3000, "a"), (3000, "b"), (0, "c"), (None, "0"), (None, "a")]
    titles = [("Scan Algorithm", "a"), ("scan", "b"), ("[ScaleML] Quantization", "c"), ("Éclair", "d"),
              ("Flash  Attention", "e"), ("flash attention", "d")]
    assert sorted(titles, key=lambda t: alphabetical(*t)) == [
        ("[ScaleML] Quantization", "c"), ("flash attention", "d"), ("Flash  Attention", "e"), ("scan", "b"),
        ("Scan Algorithm", "a"), ("Éclair", "d")]
    assert longest_first(15926, "youtube-xcpEl0cGCC4") == "9984073~youtube-xcpEl0cGCC4"


def test_the_headers_sort_by_the_keys_and_show_no_key_column(ds):
    """A click on Date, Duration or Title sorts by its key, ascending first; the others (facets
    group them) do not sort; the key is not added as a column of its own."""
    html = get(ds, "/talks/talks?_sort=longest_first").text
    headers = dict(re.findall(r'<th [^>]*data-column="([^"]+)"[^>]*>\s*(.*?)\s*</th>', html, re.S))
    assert "longest_first" not in headers
    links = {column: re.findall(r"_sort(?:_desc)?=\w+", header) for column, header in headers.items()}
    assert links == {"title": ["_sort=alphabetical"], "speakers": [], "series": [], "event": [],
                     "date": ["_sort=newest_first"], "duration_s": ["_sort_desc=longest_first"], "topics": []}
    assert "Duration&nbsp;▲" in headers["duration_s"]


def test_a_kept_value_is_what_the_talk_sorts_and_is_found_by():
    """A night whose listing has no title or length for a video: the talk keeps both (never know
    less), and its keys and search words are those of what it kept, not of the empty answer."""
    db = open_db(":memory:")

    def night(title: str, duration: int | None) -> dict:
        cluster = TalkCluster("youtube-xcpEl0cGCC4")
        cluster.add(TalkItem(source="youtube", key="xcpEl0cGCC4", title=title, duration_s=duration,
                             url="https://www.youtube.com/watch?v=xcpEl0cGCC4", url_kind="video",
                             youtube_id="xcpEl0cGCC4"), "source", 100.0)
        run_id = start_run(db, "test")
        with db.atomic():
            apply_talks(db, run_id, f"2026-12-0{run_id}", [merge_talk(cluster)])
        return db.execute("select title, duration_s, longest_first, alphabetical, search_terms from talks").fetchone()

    known = night("CUDA + ThunderKittens, but increasingly drunk", 15926)
    assert known == ("CUDA + ThunderKittens, but increasingly drunk", 15926, "9984073~youtube-xcpEl0cGCC4",
                     "cuda + thunderkittens, but increasingly drunk\tyoutube-xcpEl0cGCC4",
                     "Thunder Kittens CUDAThunderKittens ThunderKittensbut butincreasingly increasinglydrunk")
    assert night("", None) == known


def from_before_the_keys(path: Path) -> Path:
    """The index as a gputalks from before `longest_first` and `alphabetical` built it (its series'
    talks indexed by duration)."""
    conn = sqlite3.connect(path)
    conn.executescript("""
        drop index idx_talks_longest_first_id; drop index idx_talks_alphabetical_id;
        drop index idx_talks_series_longest_first_id;
        alter table talks drop column longest_first; alter table talks drop column alphabetical;
        create index idx_talks_series_duration_s on talks (series, duration_s);""")
    conn.close()
    return path


def test_an_index_from_before_the_keys_gets_them_from_the_schema_step(fresh_db_path):
    """It is given both keys, and the index they replace goes, before anything reads the talks."""
    from_before_the_keys(fresh_db_path)
    db = sqlite_utils.Database(fresh_db_path)
    ensure_schema(db)
    rows = list(db.query("select id, title, duration_s, longest_first, alphabetical from talks"))
    assert len(rows) == 150 and all(row["longest_first"] == longest_first(row["duration_s"], row["id"]) and
                                    row["alphabetical"] == alphabetical(row["title"], row["id"]) for row in rows)
    indexes = {index.name for index in db.table("talks").indexes}
    assert "idx_talks_series_duration_s" not in indexes and "idx_talks_series_longest_first_id" in indexes


def test_every_table_sorts_only_by_columns_that_page_through_each_row_once(ds, snapshot_db):
    """Every table a reader sees declares what it sorts by (metadata.json), and under each, both
    ways, a walk by 7s meets each row once. Under their other columns, on this snapshot, a walk
    by 20s met 20 of 150 changes sorted by field descending and 35 of 75 speakers by affiliation."""
    metadata = get(ds, "/-/metadata.json").json()["databases"]["talks"]["tables"]
    shown = [table["name"] for table in get(ds, "/talks.json").json()["tables"]
             if not table["hidden"] and table["name"] != "talks"]
    assert len(shown) >= 12 and not [name for name in shown if "sortable_columns" not in metadata.get(name, {})]
    for name in shown:
        pks = snapshot_db.table(name).pks
        count = snapshot_db.table(name).count
        for column in metadata[name]["sortable_columns"]:
            for direction in ("_sort", "_sort_desc"):
                path, seen = f"/talks/{name}.json?_size=7&_shape=objects&{direction}={column}", []
                while path:
                    page = get(ds, path).json()
                    seen += [tuple(row[pk] for pk in pks) for row in page["rows"]]
                    path = page["next_url"] and page["next_url"].split("localhost", 1)[-1]
                assert len(seen) == len(set(seen)) == count, (name, direction, column)
        ties = [column for column in snapshot_db.table(name).columns_dict if column not in metadata[name]["sortable_columns"]]
        refused = get(ds, f"/talks/{name}.json?_sort={ties[0]}").json() if ties else None
        assert not ties or refused == {"ok": False, "status": 400, "title": None, "error": f"Cannot sort table by "
                                       f"{ties[0]}; it sorts by its unique columns, which page without skipping a row"}


@pytest.mark.parametrize("query, said", [("", "150 rows sorted newest first"),
                                         ("_sort_desc=longest_first", "150 rows sorted shortest first"),
                                         ("series=GTC&_sort_desc=newest_first", '28 rows where series = "GTC" sorted oldest first'),
                                         ("_sort=alphabetical", "150 rows sorted by title, A to Z"),
                                         ("_sort=id", "150 rows sorted by id")])
def test_a_sorted_list_says_its_order_as_a_reader_would(ds, query, said):
    """The talks' heading and title say "sorted shortest first", not Datasette's "sorted by
    longest_first descending"; table.html is Datasette's own with those two lines changed."""
    import datasette

    html = get(ds, f"/talks/talks?{query}").text
    assert " ".join(re.search(r"<h3>(.*?)</h3>", html, re.S)[1].replace("&#34;", '"').split()) == said
    assert re.search(r"<title>(.*?)</title>", html)[1].replace("&#34;", '"') == f"talks: talks: {said}"
    ours = (Path(__file__).parent.parent / "gputalks" / "datasette" / "templates" / "table.html").read_text().splitlines()
    theirs = (Path(datasette.__file__).parent / "templates" / "table.html").read_text().splitlines()
    changed = [(a, b) for a, b in zip(theirs, ours) if a != b]
    assert len(ours) == len(theirs) and len(changed) == 2
    assert all(b == a.replace("{{ human_description_en }}", "{{ human_description_en|sort_words(sort, sort_desc) }}")
               for a, b in changed)


def test_serve_brings_an_index_from_an_older_gputalks_up_to_date(fresh_db_path, tmp_path):
    """`gputalks serve` of an index built before the keys: its Title header's sort would be an
    error page ("no such column") until the next build; the real process adds the keys first, on
    a copy swapped in, and says so."""
    with gputalks_serve(from_before_the_keys(fresh_db_path)) as served:
        sorted_page = httpx.get(f"{served.base}/talks/talks.json?_sort=alphabetical&_shape=objects&_size=3")
    assert sorted_page.status_code == 200, sorted_page.text
    assert [row["title"] for row in sorted_page.json()["rows"]] == [
        "[ScaleML] Quantization in Large Models", "A learning journey CUDA, Triton, Flash Attention",
        "Accelerate AI Inference Using DOCA for Storage"]
    assert f"{fresh_db_path}: brought up to date (an index from an older gputalks: added longest_first, alphabetical)" \
        in served.text
    assert not list(tmp_path.glob("*.building*"))
