"""Scraped descriptions as HTML a reader's browser can be given: CommonMark with links made
clickable, no raw HTML, then sanitised (nh3). One rendering for the served talk pages and the
static site."""

from __future__ import annotations

import nh3
from markdown_it import MarkdownIt

_markdown = MarkdownIt("commonmark", {"html": False, "linkify": True}).enable("linkify")


def render_markdown(text: str) -> str:
    return nh3.clean(_markdown.render(text), link_rel="nofollow noopener")
