"""gputalks: a searchable, self-refreshing index of GPU-programming talks.

One import name for the project's parts, which live at the top of the checkout:
`gputalks.scraper` (scraper/: fetch and parse), `gputalks.index` (index/: the
index and the CLI) and `gputalks.datasette` (datasette/: the Datasette plugin,
its templates and metadata). This folder holds the version and the shipped
default configuration (`config/`).
"""

__version__ = "0.1.0"
