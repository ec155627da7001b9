"""Shared fixtures. Real documents are read from ../shared/data (beside the checkout)."""

from __future__ import annotations

import sqlite3
from pathlib import Path

import pytest
import sqlite_utils

from index.refresh import DEFAULT_OVERRIDES, load_config, refresh

REPO = Path(__file__).resolve().parent.parent
SHARED = REPO.parent / "shared" / "data"
SNAPSHOT = SHARED / "snapshot"
LECTURES = SHARED / "gpu-mode-lectures"


def pytest_collection_modifyitems(config, items):
    if not SNAPSHOT.exists():
        raise pytest.UsageError(f"{SHARED} is missing: the tests read the real documents from there")


@pytest.fixture(scope="session")
def config() -> dict:
    return load_config()


@pytest.fixture(scope="session")
def snapshot_db_path(tmp_path_factory, config) -> Path:
    """The index built once from ../shared/data/snapshot (read-only for tests)."""
    path = tmp_path_factory.mktemp("snapshot") / "talks.db"
    report = refresh(path, config, snapshot=SNAPSHOT, overrides_path=DEFAULT_OVERRIDES)
    assert report.exit_code == 0, report.problems
    return path


@pytest.fixture(scope="session")
def snapshot_db(snapshot_db_path) -> sqlite_utils.Database:
    return sqlite_utils.Database(snapshot_db_path)


@pytest.fixture
def fresh_db_path(tmp_path, snapshot_db_path) -> Path:
    """A private copy of the snapshot index, for tests that write."""
    target = tmp_path / "talks.db"
    with sqlite3.connect(snapshot_db_path) as source, sqlite3.connect(target) as copy:
        source.backup(copy)
    return target
