"""The search's words: how a text (a title, a topic's alias, a reader's query) splits into the
words the index stores and the query parser matches; one tokenizer for the build and the reader."""

from __future__ import annotations

import re
from collections.abc import Sequence

TOKEN_RE = re.compile(r"\w+")
# Where a CamelCase word splits: "FlashAttention", "CuTeDSL".
CAMEL_RE = re.compile(r"(?<=[a-z0-9])(?=[A-Z])|(?<=[A-Z])(?=[A-Z][a-z])")


# "C++" as titles and readers write it, one word: "cpp" (a tokenizer of word characters keeps "c",
# a stop word, and "cuda c++" would be "cuda"). The titles' compound words hold it for the index.
CPP_RE = re.compile(r"(?<!\w)c\+\+")


def lowered(text: str) -> str:
    """The text in lower case, "c++" written "cpp" (the regex only where "++" is: most texts
    lack it, and a rebuild lowers every title and description)."""
    text = text.lower()
    return CPP_RE.sub("cpp", text) if "++" in text else text


def tokens(text: str) -> list[str]:
    return TOKEN_RE.findall(lowered(text))


def holds_run(words: tuple[str, ...], run: tuple[str, ...]) -> bool:
    """Whether `run` is found in `words`, its words in a row."""
    return any(words[n:n + len(run)] == run for n in range(len(words) - len(run) + 1))


# ASCII bytes: a word character (`\w`) stays, anything else becomes a space.
ASCII_WORDS = bytes(c if chr(c).isalnum() or chr(c) == "_" else 32 for c in range(128)) + b" " * 128


def word_line(text: str) -> str:
    """The text's `tokens` between single spaces, with one at each end (" flash attention ").
    ASCII text takes C's byte translation and split, 4x faster than the regex it equals."""
    text = lowered(text)
    if text.isascii():
        return " " + b" ".join(text.encode().translate(ASCII_WORDS).split()).decode() + " "
    return " " + " ".join(TOKEN_RE.findall(text)) + " "


# Words of a lecture folder's file names that say nothing of its subject: how repositories lay
# out files ("README.md", "src/", "main.cu", "CMakeLists.txt"), and the series' own name.
FOLDER_BOILERPLATE = frozenset(
    "readme main makefile cmakelists requirements license setup init utils util test tests src data "
    "images image img assets logs tmp png jpg gif pdf slides presentation lecture talk session mode "
    "gpumode cuda gpu example examples exmple notebook template".split())
FILE_WORD_RE = re.compile(r"[A-Za-z][A-Za-z0-9]*")
# The files whose names say what a lecture covers: code, notebooks, slides; not pictures (a
# kernel's sample input: "Grace_Hopper.jpg", screenshots), logs, build outputs or data.
SUBJECT_SUFFIXES = frozenset(
    ".cu .cuh .py .ipynb .c .cc .cpp .h .hpp .mojo .rs .jl .metal .pdf .pptx .ppt .key .odp .ods".split())
NUMBERED_RE = re.compile(r"(?<=[a-z]{5})[0-9]+$")  # a word's copy number


def folder_words(files: Sequence[str]) -> str | None:
    """The words of the file names in a talk's folder of the lectures repository, for search:
    "lecture_008/coalesce.cu", "tiling.cu", "occupancy.cu" are what the CUDA Performance
    Checklist covers, in no title or description. Parts of snake_case and CamelCase names, once
    each, of SUBJECT_SUFFIXES files (and files without one); not their types, numbers, hashes or
    FOLDER_BOILERPLATE."""
    found: dict[str, None] = {}
    for path in files:
        *folders, name = path.split("/")
        if "." in name[1:] and "." + name.rsplit(".", 1)[1].lower() not in SUBJECT_SUFFIXES:
            continue
        for part in (*folders, name.rsplit(".", 1)[0] if "." in name[1:] else name):
            for word in FILE_WORD_RE.findall(part):
                if word.lower() in FOLDER_BOILERPLATE:  # before its parts: "CMakeLists" is no "make"
                    continue
                for piece in CAMEL_RE.split(word):
                    piece = NUMBERED_RE.sub("", piece.lower())  # "privatization2", not "int8"
                    if len(piece) >= 3 and sum(c.isdigit() for c in piece) <= 2 and piece not in FOLDER_BOILERPLATE:
                        found[piece] = None
    return " ".join(found) or None
