"""Serving the index with Datasette, configured by metadata.json and datasette/."""

from __future__ import annotations

import asyncio
import hashlib
import json
import sys
import tempfile
from pathlib import Path
from typing import Any

from .resources import METADATA, PLUGINS, TEMPLATES

# The settings every served index runs with (`serve` and `publish` alike).
SERVE_SETTINGS: dict[str, Any] = {"default_page_size": 50, "default_facet_size": 10,
                                  "facet_time_limit_ms": 1000, "suggest_facets": "off"}


def metadata_for(db_path: str | Path) -> dict[str, Any]:
    """metadata.json, its database section named after the file being served
    (Datasette names a database after its file's stem)."""
    metadata = json.loads(METADATA.read_text(encoding="utf-8"))
    name = Path(db_path).stem
    databases = metadata.get("databases", {})
    if name != "talks" and "talks" in databases:
        databases[name] = databases.pop("talks")
    return metadata


def inspect_file(db_path: Path, key: str) -> Path:
    """`datasette inspect` data (hash, table counts) for this version of the file, computed once
    per version: Datasette then serves counts without counting on its first requests."""
    stat = db_path.stat()
    version = f"{stat.st_size}-{stat.st_mtime_ns}"
    directory = Path(tempfile.gettempdir())
    target = directory / f"gputalks-inspect-{db_path.stem}-{key}-{version}.json"
    if not target.exists():
        from datasette.cli import inspect_

        for stale in directory.glob(f"gputalks-inspect-{db_path.stem}-{key}-*.json"):
            stale.unlink(missing_ok=True)
        data = asyncio.run(inspect_([str(db_path)], None))
        partial = target.with_suffix(".partial")
        partial.write_text(json.dumps(data), encoding="utf-8")
        partial.replace(target)
    return target


def datasette_command(db_path: str | Path, port: int = 8001, host: str = "127.0.0.1") -> list[str]:
    db_path = Path(db_path)
    if not db_path.exists():
        raise FileNotFoundError(f"{db_path}: no index here; run `gputalks refresh` first")
    # One file per served database, rewritten on each start: nothing piles up in /tmp.
    key = hashlib.sha256(str(db_path.resolve()).encode()).hexdigest()[:12]
    metadata = Path(tempfile.gettempdir()) / f"gputalks-metadata-{db_path.stem}-{key}.json"
    metadata.write_text(json.dumps(metadata_for(db_path)), encoding="utf-8")
    command = [sys.executable, "-m", "datasette", "serve", "-i", str(db_path),
               "--inspect-file", str(inspect_file(db_path, key)),
               "--metadata", str(metadata), "--template-dir", str(TEMPLATES),
               "--plugins-dir", str(PLUGINS), "--host", host, "--port", str(port)]
    for name, value in SERVE_SETTINGS.items():
        command += ["--setting", name, str(value)]
    return command
