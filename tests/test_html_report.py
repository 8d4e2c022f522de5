"""The HTML report, opened in a real browser (headless Chromium)."""

from __future__ import annotations

import re
import shutil
import subprocess
from pathlib import Path

import pytest

from compiletrace import GraphRecord
from compiletrace._core.records import CacheOutcome
from compiletrace.reports import component_chart_svg, html_report, summary_line, timeline_svg

CHROMIUM = shutil.which("chromium") or "/usr/bin/chromium"
needs_chromium = pytest.mark.skipif(not Path(CHROMIUM).exists(), reason="Debian's chromium is not installed")

S = 1_000_000_000
RECORDS = [
    GraphRecord("0/0", "encoder", "inductor", "forward", 19, 0, 3 * S, 1 * S, 2 * S, 0,
                fx_graph_cache=CacheOutcome.MISS),
    GraphRecord("1/0", "language_model", "inductor", "forward", 75, 3 * S, 8 * S, 1 * S, 4 * S, 3 * S,
                backward_ns=2 * S, backward_start_unix_ns=9 * S, fx_graph_cache=CacheOutcome.HIT),
    GraphRecord("1/1", "language_model", "inductor", "forward", 75, 10 * S, 11 * S, None, S // 2, 10 * S,
                is_recompile=True, recompile_reason="tensor 'x' size mismatch <at> index 0"),
]  # fmt: skip


def open_in_chromium(page: Path, tmp_path: Path) -> tuple[str, list[str]]:
    """The DOM after load, and the browser's console messages."""
    proc = subprocess.run(
        [CHROMIUM, "--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking",
         "--disable-component-update", "--disable-sync", "--no-first-run", "--disable-extensions",
         f"--user-data-dir={tmp_path / 'profile'}", "--enable-logging=stderr", "--v=0",
         "--dump-dom", page.as_uri()],
        capture_output=True, text=True, timeout=90, check=True,
    )  # fmt: skip
    console = [line for line in proc.stderr.splitlines() if ":CONSOLE" in line]
    return proc.stdout, console


def test_report_is_self_contained() -> None:
    page = html_report(RECORDS, meta={"model": "m:f", "backend": "inductor"})
    assert "<script" not in page and "<link" not in page and "<img" not in page
    assert not re.search(r"(src|href)\s*=", page)
    assert "url(" not in page and "@import" not in page
    assert re.findall(r"https?://[^\"' ]+", page) == ["http://www.w3.org/2000/svg"] * 2  # namespaces only
    assert "&lt;at&gt;" in page  # text from records is escaped


def test_chart_splits_each_component_by_phase() -> None:
    svg = component_chart_svg(RECORDS)
    # language_model: Dynamo 1 s, backend 4 s + (unsplit frame 1 s), backward 2 s.
    assert "language_model dynamo: 1.000 s" in svg
    assert "language_model backend: 4.000 s" in svg
    assert "language_model backward: 2.000 s" in svg
    assert "language_model frame: 1.000 s" in svg
    assert "encoder backend: 2.000 s" in svg
    assert ">8.00 s<" in svg and ">3.00 s<" in svg  # per-component totals beside the bars
    timeline = timeline_svg(RECORDS)
    assert timeline.count('class="graph"') == 3 and timeline.count('class="backward"') == 1


@needs_chromium
def test_report_renders_in_chromium_without_errors(tmp_path: Path) -> None:
    page = tmp_path / "report.html"
    page.write_text(html_report(RECORDS, meta={"model": "compiletrace.models:build_demo"}))
    dom, console = open_in_chromium(page, tmp_path)
    assert console == []
    assert summary_line(RECORDS) in dom
    for heading in (
        "Compile time per component, by phase",
        "Timeline of graphs",
        "Per component",
        "Per graph",
    ):
        assert f"<h2>{heading}</h2>" in dom
    assert dom.count("<svg") == 2
    assert "tensor 'x' size mismatch &lt;at&gt; index 0" in dom
    assert re.search(r"<td>1/1</td><td>language_model</td>", dom)


@needs_chromium
def test_the_console_check_catches_errors(tmp_path: Path) -> None:
    page = tmp_path / "bad.html"
    page.write_text("<html><body><script>undefinedFn();</script></body></html>")
    _, console = open_in_chromium(page, tmp_path)
    assert any("undefinedFn is not defined" in line for line in console)
