"""Bare Datasette for the benchmark's baseline: Datasette with none of gputalks' plugins, which
its entry points register in every Datasette of this environment.

    python -m bench.bare serve -i talks.db --port 8002        # Datasette's own CLI
    BENCH_BARE_DB=talks.db uvicorn --factory bench.bare:app --workers 2   # as many processes as gputalks
"""

import json
import os

from datasette.cli import cli
from datasette.plugins import DEFAULT_PLUGINS, pm

from gputalks.site.serve import SERVE_SETTINGS

for name, plugin in list(pm.list_name_plugin()):
    if getattr(plugin, "__name__", "").startswith("gputalks."):
        pm.unregister(plugin)
assert all(pm.get_plugin(name) is not None for name in DEFAULT_PLUGINS)

BARE_DB = "BENCH_BARE_DB"


def app():
    """One worker's ASGI app: `datasette -i` of the file, with gputalks' serve settings (page size
    included) and its inspect data when given (BENCH_BARE_INSPECT), as `datasette -i
    --inspect-file` would build it."""
    from datasette.app import Datasette

    inspect_file = os.environ.get("BENCH_BARE_INSPECT")
    inspect_data = json.loads(open(inspect_file, encoding="utf-8").read()) if inspect_file else None
    return Datasette([], immutables=[os.environ[BARE_DB]], inspect_data=inspect_data,
                     settings=SERVE_SETTINGS).app()


if __name__ == "__main__":
    cli()
