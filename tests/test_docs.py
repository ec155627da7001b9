"""The README stays true: its commands are the ones CI and users run."""

import re

from gputalks.index.cli import cli

from .conftest import REPO

README = (REPO / "README.md").read_text()


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
    for name in cli.commands:
        assert f"gputalks {name}" in README, name


def test_exit_codes_are_documented():
    from gputalks.index import runs

    for code in (runs.EXIT_OK, runs.EXIT_PARTIAL, runs.EXIT_USAGE, runs.EXIT_FAILED, runs.EXIT_LOCKED,
                 runs.EXIT_INTERRUPTED):
        assert f"| {code} |" in README


def test_every_refresh_setting_is_documented_with_its_default():
    from gputalks.index.validation import RefreshConfig

    for name, field in RefreshConfig.model_fields.items():
        assert re.search(rf"^{name} = {field.default!r}\s+#", README, re.M), name


def test_the_readme_shows_the_last_benchmark_results():
    """The table between the bench-table markers is the one bench/run.py prints for bench/results.json."""
    import json

    from bench.run import README_END, README_START, table_lines

    results = json.loads((REPO / "bench" / "results.json").read_text())
    shown = README.split(README_START, 1)[1].split(README_END, 1)[0]
    assert shown.strip() == "```\n" + "\n".join(table_lines(results)) + "\n```"
