"""The static site's search (`publish pages`: Pagefind, in the reader's browser) judged on the same
reader queries as the server (bench/judged_queries.toml), in headless Chromium from the files,
beside the server's scores in the same run.

    .venv/bin/python -m bench.static_search
"""

from __future__ import annotations

import functools
import sqlite3
import tempfile
import threading
from http.server import SimpleHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

from bench.search_quality import by_category, judged, query_scores, quality

CHROMIUM = "/usr/bin/chromium"
# search.js's tiers as the server's (search/ranking.py MATCHES): all, most, related, some.
STATIC_TIERS = {0: 1, 1: 2, 2: 3, 3: 4}
SEARCH = """async (queries) => {
  const found = {};
  for (const q of queries) found[q] = (await window.gputalksSearch(q)).slice(0, 10);
  return found;
}"""


def static_results(site: Path, ids_by_file: dict[str, str], queries: list[str]) -> dict[str, list[tuple[str, int]]]:
    """Each query's first 10 talks as the static search page ranks them (site/templates/search.js), with their tier."""
    from playwright.sync_api import sync_playwright

    class Quiet(SimpleHTTPRequestHandler):
        def log_message(self, *args) -> None:
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), functools.partial(Quiet, directory=str(site)))
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        with sync_playwright() as p:
            browser = p.chromium.launch(executable_path=CHROMIUM, args=[
                "--no-sandbox", "--disable-gpu", "--disable-background-networking", "--no-first-run"])
            page = browser.new_page()
            page.goto(f"http://127.0.0.1:{server.server_address[1]}/search.html")
            page.wait_for_function("typeof window.gputalksSearch === 'function'", timeout=30000)
            urls = page.evaluate(SEARCH, queries)
            browser.close()
    finally:
        server.shutdown()
        server.server_close()
    return {q: [(ids_by_file.get(hit["url"].rsplit("/", 1)[-1].removesuffix(".html"), hit["url"]),
                 STATIC_TIERS[hit["tier"]]) for hit in found] for q, found in urls.items()}


def main() -> None:
    from gputalks.index.pipeline import RefreshOptions, refresh
    from gputalks.project.settings import default_settings
    from gputalks.site.serve import served_datasette
    from gputalks.site.static import build_site, slug

    with tempfile.TemporaryDirectory() as work:
        db_path = Path(work) / "talks.db"
        refresh(db_path, default_settings(), RefreshOptions(snapshot=Path(__file__).parents[2] / "shared" / "data" / "snapshot"))
        build_site(db_path, Path(work) / "site")
        with sqlite3.connect(db_path) as conn:
            ids = {slug(talk_id): talk_id for (talk_id,) in conn.execute("select id from talks")}
        queries = judged()
        found = static_results(Path(work) / "site", ids, [q.q for q in queries])
        static = by_category([(q, query_scores(q, found[q.q])) for q in queries])
        server = quality(served_datasette(db_path))
        print(f"{'category':<16} {'queries':>7} {'server P@5':>10} {'static P@5':>10} {'server R@10':>11} {'static R@10':>11}")
        for category in sorted(static):
            a, b = server[category], static[category]
            print(f"{category:<16} {a['queries']:>7} {a['p5']:>10} {b['p5']:>10} {a['r10']:>11} {b['r10']:>11}")


if __name__ == "__main__":
    main()
