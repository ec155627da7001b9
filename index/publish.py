"""Publishing the index: `datasette publish` with gputalks' metadata, templates
and plugins, the plugins' own packages installed, the index served immutable
(Datasette's publish commands serve every file with `-i` and an inspect file).

Fly goes through datasette-publish-fly, Cloud Run through Datasette itself.
"""

from __future__ import annotations

import json
import re
import sys
from importlib.metadata import requires, version
from pathlib import Path

from .resources import PLUGINS, TEMPLATES
from .serve import SERVE_SETTINGS, metadata_for


def plugin_packages() -> list[str]:
    """The packages a published container installs for gputalks' plugins: gputalks' own
    dependencies, read from its package metadata (one list, in pyproject.toml). Names only: the
    generated Dockerfile puts them on a shell line, where ">" would redirect."""
    names = [re.match(r"[A-Za-z0-9._-]+", line).group(0) for line in requires("gputalks") or []
             if "extra ==" not in line]
    return [name for name in names if name.lower() != "datasette"]  # pinned on its own


TARGETS = ("fly", "cloudrun")


def publish_command(target: str, db_path: Path, metadata_path: Path, *, app: str | None = None,
                    generate_dir: Path | None = None) -> list[str]:
    """The `datasette publish` command line for `target`."""
    if target not in TARGETS:
        raise ValueError(f"unknown target {target!r}: {' or '.join(TARGETS)}")
    command = [sys.executable, "-m", "datasette", "publish", target, str(db_path),
               "--metadata", str(metadata_path), "--template-dir", str(TEMPLATES),
               "--plugins-dir", str(PLUGINS)]
    # The Datasette this gputalks runs with (0.65, not a 1.0 alpha), then the plugins' packages.
    for package in [f"datasette=={version('datasette')}", *plugin_packages()]:
        command += ["--install", package]
    settings = [arg for name, value in SERVE_SETTINGS.items() for arg in ("--setting", name, str(value))]
    name = app or Path(db_path).stem
    if target == "fly":
        command += settings + ["--app", name]
        if generate_dir is not None:
            command += ["--generate-dir", str(generate_dir)]
    else:  # Cloud Run takes serve settings through --extra-options
        command += ["--service", name, "--extra-options", " ".join(settings)]
    return command


def write_metadata(db_path: Path, directory: Path) -> Path:
    """metadata.json for the published database, written into `directory`."""
    target = directory / "metadata.json"
    target.write_text(json.dumps(metadata_for(db_path), indent=2), encoding="utf-8")
    return target
