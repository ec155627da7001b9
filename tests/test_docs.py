"""The README stays true: its commands are the ones CI and users run."""

import re

from gputalks.cli import cli

from tests.conftest import REPO

README = (REPO / "README.md").read_text()
BENCHMARK = (REPO / "docs" / "benchmark.md").read_text()


def fenced_commands() -> list[str]:
    return [block.strip() for block in re.findall(r"```bash\n(.*?)```", README, re.S)]


def test_ci_runs_the_readme_test_command():
    test_command = next(c for c in fenced_commands() if "pytest" in c)
    ci = (REPO / ".ci" / "run").read_text()
    assert test_command in ci.splitlines()


def test_main_command_replays_the_shared_snapshot():
    main = fenced_commands()[0]
    assert "pip install -e ." in main and "gputalks refresh --snapshot ../shared/data/snapshot" in main


def test_every_command_is_documented():
    for name in cli.list_commands(None):
        assert f"gputalks {name}" in README, name


def test_exit_codes_are_documented():
    from gputalks import exit_codes

    for code in (exit_codes.EXIT_OK, exit_codes.EXIT_PARTIAL, exit_codes.EXIT_USAGE, exit_codes.EXIT_FAILED,
                 exit_codes.EXIT_LOCKED, exit_codes.EXIT_INTERRUPTED):
        assert f"| {code} |" in README


def test_every_refresh_setting_is_documented_with_its_default():
    from gputalks.project.validation import RefreshConfig

    for name, field in RefreshConfig.model_fields.items():
        assert re.search(rf"^{name} = {field.default!r}\s+#", README, re.M), name


def test_the_benchmark_page_shows_the_last_results():
    """The table between the bench-table markers is the one bench/run.py prints for bench/results.json."""
    import json

    from bench.report import README_END, README_START, table_lines

    results = json.loads((REPO / "bench" / "results.json").read_text())
    shown = BENCHMARK.split(README_START, 1)[1].split(README_END, 1)[0]
    assert shown.strip() == "```\n" + "\n".join(table_lines(results)) + "\n```"


def test_the_readme_shows_the_reader_pages_of_the_last_results():
    """README.md's reader-page table (p95 at 8 clients, ratio to bare) is bench/results.json's."""
    import json

    from bench.report import READER_END, READER_START, reader_lines

    results = json.loads((REPO / "bench" / "results.json").read_text())
    shown = README.split(READER_START, 1)[1].split(READER_END, 1)[0].strip().splitlines()
    assert shown == reader_lines(results)
    assert any(line.startswith("| topic page") for line in shown) and len(shown) >= 10
    assert shown[-1].startswith(("Missed in this run: ", "Every target met"))
    from bench.report import table_lines
    for row in table_lines(results):  # every target the benchmark's table misses, the README says
        if row.endswith("MISS"):
            assert row.split("  ")[0] in shown[-1], row


def test_the_readme_is_for_users():
    """What a user needs, on one page: the design notes and benchmark history live in docs/."""
    assert len(README.splitlines()) <= 250
    for needed in ("Python 3.11", "## Install", "## Exit codes", "## Configuration", "gputalks serve",
                   "gputalks publish", "docs/cli.md", "docs/design.md", "docs/benchmark.md"):
        assert needed in README, needed


def test_the_cli_reference_is_the_commands_own_help():
    import runpy

    generator = runpy.run_path(str(REPO / "docs" / "cli.py"))
    assert (REPO / "docs" / "cli.md").read_text() == generator["reference"](), \
        "docs/cli.md is out of date: run .venv/bin/python docs/cli.py"


def test_the_docs_links_resolve():
    for page in [REPO / "README.md", *(REPO / "docs").glob("*.md")]:
        for target in re.findall(r"\]\(([^)#:]+)(?:#[^)]*)?\)", page.read_text()):
            assert (page.parent / target).exists(), f"{page.name}: {target}"
