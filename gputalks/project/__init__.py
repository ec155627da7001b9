"""The project: the folder of a `gputalks.toml` (usually the docs' own repository), its settings
(sources, overrides, topics, curation) validated, and the files gputalks ships as defaults."""

PROJECT_FILE = "gputalks.toml"
PROJECT_ENV = "GPUTALKS_PROJECT"  # where the project is, when not found from the current folder
