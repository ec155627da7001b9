"""Outputs never destroy inputs: `publish pages --out` and `--generate-dir` replace only a folder
gputalks wrote itself; a project, a docs git repository or a user's folder is refused with one
line and exit 2, before any work, every file still there byte for byte (real processes)."""

from __future__ import annotations

import hashlib
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from gputalks.site.outputs import MARKER
from gputalks.project.resources import DEFAULT_SOURCES


def gputalks(cwd: Path, *args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "gputalks", *args], cwd=cwd, capture_output=True,
                          text=True, timeout=300, env={**os.environ, "GPUTALKS_PROJECT": ""})


def contents(root: Path) -> dict[str, str]:
    """Every file under `root` and a digest of its bytes."""
    return {str(p.relative_to(root)): hashlib.sha256(p.read_bytes()).hexdigest()
            for p in sorted(root.rglob("*")) if p.is_file()}


@pytest.fixture
def project(tmp_path, snapshot_db_path) -> Path:
    """A docs repository that is a gputalks project: git, docs, curation, the index."""
    root = tmp_path / "docs-repo"
    (root / "docs").mkdir(parents=True)
    (root / "curation").mkdir()
    shutil.copy(snapshot_db_path, root / "talks.db")
    (root / "gputalks.toml").write_text(f'[gputalks]\ndb = "talks.db"\nsources = "{DEFAULT_SOURCES}"\n')
    (root / "overrides.toml").write_text("# mine\n")
    (root / "docs" / "videos.fr.md").write_text("# Vidéos\n")
    subprocess.run(["git", "init", "-q", str(root)], check=True)
    return root


@pytest.mark.parametrize("out", [".", "..", "docs", "curation/.."])
def test_publish_pages_refuses_the_project_and_what_holds_it(project, out):
    before = contents(project.parent)
    done = gputalks(project, "publish", "pages", "--out", out)
    assert done.returncode == 2, done.stderr
    assert done.stderr.count("\n") == 1 and done.stderr.startswith(f"gputalks: {out}: "), done.stderr
    assert contents(project.parent) == before


def test_a_git_work_tree_and_the_current_folder_are_refused_without_a_project(tmp_path, snapshot_db_path):
    repo = tmp_path / "site-repo"
    repo.mkdir()
    subprocess.run(["git", "init", "-q", str(repo)], check=True)
    before = contents(tmp_path)
    as_out = gputalks(tmp_path, "publish", "pages", "--db", str(snapshot_db_path), "--out", "site-repo")
    assert as_out.returncode == 2 and "root of a git work tree" in as_out.stderr, as_out.stderr
    here = gputalks(repo, "publish", "pages", "--db", str(snapshot_db_path), "--out", ".")
    assert here.returncode == 2 and "is the current folder" in here.stderr, here.stderr
    assert contents(tmp_path) == before


def test_publish_pages_replaces_its_own_output_and_nothing_else(project):
    first = gputalks(project, "publish", "pages", "--out", "site")
    assert first.returncode == 0, first.stderr
    site = project / "site"
    assert (site / MARKER).is_file() and (site / "talks" / "gpumode-lecture-012.html").is_file()
    (site / "talks" / "stale.html").write_text("from an older run\n")
    again = gputalks(project, "publish", "pages", "--out", "site")
    assert again.returncode == 0, again.stderr
    assert not (site / "talks" / "stale.html").exists() and (site / "index.html").is_file()
    assert [p.name for p in project.iterdir() if p.name.startswith(".site")] == []  # no work folder left
    (project / "notes").mkdir()
    (project / "notes" / "todo.md").write_text("mine\n")
    refused = gputalks(project, "publish", "pages", "--out", "notes")
    assert refused.returncode == 2 and "not empty and was not written by gputalks" in refused.stderr
    assert (project / "notes" / "todo.md").read_text() == "mine\n"
