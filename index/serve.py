"""Serving the index with Datasette, configured by metadata.json and datasette/."""

from __future__ import annotations

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


def datasette_command(db_path: str | Path, port: int = 8001, host: str = "127.0.0.1") -> list[str]:
    db_path = Path(db_path)
    if not db_path.exists():
        raise FileNotFoundError(f"{db_path}: no index here; run `gputalks refresh` first")
    # One file per served database, rewritten on each start: nothing piles up in /tmp.
    key = hashlib.sha256(str(db_path.resolve()).encode()).hexdigest()[:12]
    metadata = Path(tempfile.gettempdir()) / f"gputalks-metadata-{db_path.stem}-{key}.json"
    metadata.write_text(json.dumps(metadata_for(db_path)), encoding="utf-8")
    command = [sys.executable, "-m", "datasette", "serve", "-i", str(db_path),
               "--metadata", str(metadata), "--template-dir", str(TEMPLATES),
               "--plugins-dir", str(PLUGINS), "--host", host, "--port", str(port)]
    for name, value in SERVE_SETTINGS.items():
        command += ["--setting", name, str(value)]
    return command
