"""The benchmark asks for the pages a reader's clicks ask for (bench/pages.py)."""

import asyncio
import subprocess
import sys
from pathlib import Path
from urllib.parse import parse_qs, urlsplit

from datasette.app import Datasette

from bench.pages import PAGE_SIZE, Facts
from gputalks.site.serve import served_datasette

REPO = Path(__file__).resolve().parent.parent
# bench.bare's Datasette (gputalks' plugins unregistered), in its own process
BARE_NEXT = """
import asyncio, sys
from urllib.parse import parse_qs, urlsplit
import bench.bare
from datasette.app import Datasette
from gputalks.site.serve import SERVE_SETTINGS
ds = Datasette([], immutables=[sys.argv[1]], settings=SERVE_SETTINGS)
async def main():
    for path in sys.argv[2:]:
        print(parse_qs(urlsplit((await ds.client.get(path)).json()["next_url"]).query)["_next"][0])
asyncio.run(main())
"""


def next_token(ds: Datasette, path: str) -> str:
    async def inner():
        return (await ds.client.get(path)).json()["next_url"]
    return parse_qs(urlsplit(asyncio.run(inner())).query)["_next"][0]


def test_next_pages_are_the_ones_each_servers_next_link_asks_for(snapshot_db_path):
    """The "Next" pages of the default order: gputalks' by its sort key and id, bare Datasette's
    (no metadata) by the primary key, the same page of each at the same page size."""
    tokens = Facts.of(snapshot_db_path).next_tokens
    assert len(tokens) == 150 // PAGE_SIZE
    ours = served_datasette(snapshot_db_path)
    assert next_token(ours, "/talks/talks.json?_col=id") == tokens[0][0]
    assert next_token(ours, f"/talks/talks.json?_col=id&_next={tokens[0][0]}") == tokens[1][0]
    bare = subprocess.run([sys.executable, "-c", BARE_NEXT, str(snapshot_db_path), "/talks/talks.json",
                           f"/talks/talks.json?_next={tokens[0][1]}"], cwd=REPO, capture_output=True, text=True, check=True)
    assert bare.stdout.split() == [tokens[0][1], tokens[1][1]]
