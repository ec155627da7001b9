"""Bare Datasette for the benchmark's baseline: `datasette serve` with none of gputalks'
plugins, which its entry points register in every Datasette of this environment.

    python -m bench.bare serve -i talks.db --port 8002
"""

from datasette.cli import cli
from datasette.plugins import DEFAULT_PLUGINS, pm

for name, plugin in list(pm.list_name_plugin()):
    if getattr(plugin, "__name__", "").startswith("gputalks."):
        pm.unregister(plugin)
assert all(pm.get_plugin(name) is not None for name in DEFAULT_PLUGINS)

if __name__ == "__main__":
    cli()
