"""Every relative link in the docs leads somewhere: the file exists and its ``#anchor`` is
a heading there, slugged as GitHub slugs it (lowercase, spaces to ``-``, punctuation other
than ``-`` and ``_`` dropped, ``-1``, ``-2`` ... after repeated headings)."""

from __future__ import annotations

import json
import re
import shlex
from collections.abc import Iterator
from pathlib import Path
from urllib.parse import unquote

import pytest

ROOT = Path(__file__).resolve().parents[1]
DOCS = sorted([ROOT / "README.md", *(ROOT / "docs").glob("*.md"), *(ROOT / "docs").glob("*.ipynb")])

FENCE = re.compile(r"^ {0,3}(```|~~~)")
HEADING = re.compile(r"^ {0,3}(#{1,6})\s+(.*?)(?:\s+#+)?\s*$")
# [text](target "title") and ![alt](target); the text may hold one level of brackets.
INLINE_LINK = re.compile(r"!?\[(?:[^\[\]]|\[[^\[\]]*\])*\]\(\s*<?([^)\s>]*)>?(?:\s+[\"'][^)]*[\"'])?\s*\)")
REFERENCE = re.compile(r"^ {0,3}\[[^\]]+\]:\s*<?(\S+?)>?(?:\s+.*)?$")
HTML_LINK = re.compile(r"""<(?:a|img)\b[^>]*?\b(?:href|src)\s*=\s*["']([^"']+)["']""", re.I)
EXPLICIT_ANCHOR = re.compile(r"""<a\b[^>]*?\b(?:name|id)\s*=\s*["']([^"']+)["']""", re.I)
CODE_SPAN = re.compile(r"(`+)(.+?)\1")


def markdown_of(path: Path) -> str:
    """A file's markdown: the file itself, or a notebook's markdown cells."""
    text = path.read_text(encoding="utf-8")
    if path.suffix != ".ipynb":
        return text
    cells = json.loads(text)["cells"]
    return "\n\n".join("".join(c["source"]) for c in cells if c["cell_type"] == "markdown")


def prose_lines(markdown: str) -> Iterator[str]:
    """The lines outside fenced code blocks (a ``# comment`` there is no heading, a
    ``[x](y)`` no link)."""
    fence = None
    for line in markdown.splitlines():
        opened = FENCE.match(line)
        if fence is None and opened:
            fence = opened.group(1)
        elif fence is not None and line.lstrip().startswith(fence):
            fence = None
        elif fence is None:
            yield line


def slug(heading: str) -> str:
    """A heading's anchor, as GitHub makes it from the heading's text.

    >>> slug("Harness (`benchmarks/bench_harness.py`)")
    'harness-benchmarksbench_harnesspy'
    >>> slug("The start-up benchmark: `compiletrace.bench`")
    'the-start-up-benchmark-compiletracebench'
    >>> slug("Cold vs warm cache")
    'cold-vs-warm-cache'
    >>> slug("See [the guide](guide.md) **now**")
    'see-the-guide-now'
    """
    text = re.sub(r"!?\[([^\]]*)\]\([^)]*\)", r"\1", heading)  # a link's text, not its target
    text = re.sub(r"<[^>]+>", "", text)  # inline HTML tags
    text = text.replace("`", "").lower()
    text = re.sub(r"[^\w\- ]", "", text)  # \w: letters, digits and "_", in any script
    return text.replace(" ", "-")


def anchors(path: Path) -> set[str]:
    """Every anchor a file has: its headings' slugs (repeats numbered) and explicit anchors."""
    seen: dict[str, int] = {}
    out: set[str] = set()
    for line in prose_lines(markdown_of(path)):
        out.update(EXPLICIT_ANCHOR.findall(line))
        heading = HEADING.match(line)
        if heading:
            base = slug(heading.group(2))
            n = seen.get(base, 0)
            seen[base] = n + 1
            out.add(base if n == 0 else f"{base}-{n}")
    return out


def links(path: Path) -> list[str]:
    """Every link target in a file's prose (inline, reference-style and HTML)."""
    found = []
    for line in prose_lines(markdown_of(path)):
        reference = REFERENCE.match(line)
        if reference:
            found.append(reference.group(1))
            continue
        prose = CODE_SPAN.sub("code", line)  # `[x](y)` in code is an example, not a link
        found += INLINE_LINK.findall(prose) + HTML_LINK.findall(prose)
    return found


def broken_links(path: Path) -> list[str]:
    """The relative links of ``path`` that lead nowhere, each with the reason."""
    bad = []
    for target in links(path):
        if not target or re.match(r"^[a-z][a-z0-9+.-]*:|^//", target, re.I):
            continue  # absolute: http:, https:, mailto: ...
        file_part, _, anchor = target.partition("#")
        dest = (path.parent / unquote(file_part)).resolve() if file_part else path
        if not dest.exists():
            bad.append(f"{target}: no file {dest.relative_to(ROOT) if dest.is_relative_to(ROOT) else dest}")
        elif anchor and dest.suffix in (".md", ".ipynb"):
            if unquote(anchor) not in anchors(dest):
                bad.append(f"{target}: no heading with anchor #{anchor} in {dest.name}")
        elif anchor and not re.fullmatch(r"L\d+(-L\d+)?", anchor):
            bad.append(f"{target}: #{anchor} is no line anchor (#L12, #L12-L20) of {dest.name}")
    return bad


@pytest.mark.parametrize("path", DOCS, ids=lambda p: str(p.relative_to(ROOT)))
def test_every_relative_link_resolves(path: Path) -> None:
    assert broken_links(path) == []


def test_the_check_finds_links_and_catches_broken_ones(tmp_path: Path) -> None:
    # A check that cannot fail is no check: the docs hold relative links and anchors, and
    # a broken file, anchor or line anchor is caught, while code and absolute links are not.
    targets = [t for p in DOCS for t in links(p) if not re.match(r"^[a-z]+:", t)]
    assert len(targets) >= 15 and sum("#" in t for t in targets) >= 4
    (tmp_path / "other.md").write_text("# Other\n\n## Set-up: `x.y`\n\n## Set-up: `x.y`\n")
    doc = tmp_path / "doc.md"
    doc.write_text(
        "# Doc\n\n## Here & now\n\n"
        "[ok](other.md#set-up-xy) [second](other.md#set-up-xy-1) [self](#here--now)\n"
        "[file](missing.md) [anchor](other.md#setup) [line](other.md#top)\n"
        "`[code](nowhere.md)` [web](https://example.com/x.md#y) [ref]\n\n"
        "```\n[fenced](nowhere.md)\n# not a heading\n```\n\n"
        "[ref]: gone.md\n"
    )
    assert broken_links(doc) == [
        "missing.md: no file " + str((tmp_path / "missing.md").resolve()),
        "other.md#setup: no heading with anchor #setup in other.md",
        "other.md#top: no heading with anchor #top in other.md",
        "gone.md: no file " + str((tmp_path / "gone.md").resolve()),
    ]


def test_the_readmes_first_install_is_one_that_works_from_a_checkout() -> None:
    """compiletrace is on no package index: the README's first commands install it from the
    checkout (an extra that pyproject.toml declares), and say it is not published."""
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    first = readme.split("```sh\n", 1)[1].split("```", 1)[0]
    installs = [shlex.split(line.partition("#")[0]) for line in first.splitlines() if "pip install" in line]
    assert installs, first
    requirements = [word for words in installs for word in words[2:] if not word.startswith("-")]
    ours = [r for r in requirements if "compiletrace" in r or r.startswith(".")]
    assert ours == [".[sdk]"], requirements  # the checkout itself, never a name an index would resolve
    assert any("-e" in words and ".[sdk]" in words for words in installs)
    assert re.search(r"^sdk = \[", (ROOT / "pyproject.toml").read_text(encoding="utf-8"), re.M)
    assert "not published" in readme.split("```sh\n", 1)[0]
