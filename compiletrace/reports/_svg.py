"""What every chart is drawn with, written once: an inline SVG as wide as its container
that carries its font and its title, positions in percent of its width (bars scale with
it, text does not: a chart fills a laptop's window and a phone's alike), a bar with its
tooltip, a legend of swatches, and a time axis with its grid.

>>> axis = TimeAxis(start_ns=0, span_ns=4 * 10**9)
>>> print(axis.bar(10**9, 2 * 10**9, 16, 12, "#0072B2", tip="load <w>"))
<rect x="25.00%" y="16" width="25.00%" height="12" fill="#0072B2"><title>load &lt;w&gt;</title></rect>
"""

from __future__ import annotations

import html
import math
from collections.abc import Sequence
from dataclasses import dataclass

from compiletrace._data.records import NS_PER_S

__all__ = [
    "FONT",
    "SLIVER_PCT",
    "LegendItem",
    "TimeAxis",
    "axis_ticks",
    "esc",
    "legend",
    "pct",
    "rect",
    "svg_open",
]

FONT = "system-ui, -apple-system, 'Segoe UI', Roboto, sans-serif"
SLIVER_PCT = 0.2  # the narrowest bar drawn, in percent of the width: a sliver stays visible
# A legend: 3 entries of 120 px a line (a phone's width), 18 px a line.
LEGEND_COLUMNS, LEGEND_COLUMN, LEGEND_LINE = 3, 120, 18


def esc(value: object) -> str:
    """``value`` as text safe in markup and in an attribute's quotes."""
    return html.escape(str(value), quote=True)


def pct(value: float) -> str:
    """An x coordinate or a width in percent of the chart's width."""
    return f"{value:.2f}%"


def svg_open(cls: str, height: float, title: str, *, font_size: int = 13, attrs: str = "") -> str:
    """A chart's opening tag and its ``<title>``: as wide as its container, ``height`` px
    high, with its own font (presentation attributes, which a page's CSS may override), so
    that alone in a notebook cell it looks as it does in a report."""
    return (
        f'<svg xmlns="http://www.w3.org/2000/svg" class="{cls}" role="img" width="100%" '
        f'height="{height}" font-family="{FONT}" font-size="{font_size}" fill="currentColor"{attrs}>'
        f"<title>{esc(title)}</title>"
    )


def rect(
    x: str,
    y: float,
    width: str,
    height: float,
    fill: str,
    *,
    cls: str = "",
    attrs: str = "",
    edge: bool = False,
    tip: str | None = None,
) -> str:
    """One rectangle: a bar or a swatch, with ``tip`` as its tooltip (its ``<title>``).
    ``edge`` outlines a fill too light to stand out from white."""
    head = f'<rect class="{cls}"' if cls else "<rect"
    stroke = ' stroke="#000" stroke-opacity="0.3"' if edge else ""
    shape = f'{head}{attrs} x="{x}" y="{y}" width="{width}" height="{height}" fill="{fill}"{stroke}'
    return f"{shape}/>" if tip is None else f"{shape}><title>{esc(tip)}</title></rect>"


@dataclass(frozen=True)
class LegendItem:
    """One entry of a legend: a swatch of ``fill`` and its label (``tip``, its tooltip)."""

    fill: str
    label: str
    tip: str | None = None
    edge: bool = False  # a light fill, outlined as its bars are
    cls: str = ""  # the swatch's class (a phase's bars and its swatch share it)
    attrs: str = ""  # the entry's own attributes (``data-phase``)


def legend(items: Sequence[LegendItem]) -> tuple[str, int]:
    """A swatch and a label per item, in evenly spaced columns; its markup and its height.
    An inner SVG whose viewBox is one line's width keeps the legend at its size,
    left-aligned, in a wide chart, and shrinks it (``meet``) only in a chart narrower than a
    line, so it never overflows.

    >>> markup, height = legend([LegendItem("#0072B2", "phase"), LegendItem("#E69F00", "compiling")])
    >>> height, markup.count('class="legend-item"')
    (18, 2)
    """
    line_w = LEGEND_COLUMNS * LEGEND_COLUMN
    height = LEGEND_LINE * -(-len(items) // LEGEND_COLUMNS)
    parts = [
        f'<svg class="legend" width="100%" height="{height}" viewBox="0 0 {line_w} {height}" '
        'preserveAspectRatio="xMinYMin meet" font-size="12">'
    ]
    for k, item in enumerate(items):
        x, y = LEGEND_COLUMN * (k % LEGEND_COLUMNS), LEGEND_LINE * (k // LEGEND_COLUMNS)
        tip = "" if item.tip is None else f"<title>{esc(item.tip)}</title>"
        swatch = rect(str(x), y + 2, "12", 12, item.fill, cls=item.cls, edge=item.edge)
        parts.append(
            f'<g class="legend-item"{item.attrs}>{tip}{swatch}'
            f'<text x="{x + 17}" y="{y + 12.5}">{esc(item.label)}</text></g>'
        )
    parts.append("</svg>")
    return "".join(parts), height


@dataclass(frozen=True)
class TimeAxis:
    """A time axis across a chart's width: ``span_ns`` nanoseconds from ``start_ns``
    (Unix ns), each instant at its percent of the width."""

    start_ns: int
    span_ns: int

    def x(self, t: float) -> float:
        """Where the instant ``t`` lies, in percent of the width."""
        return 100 * (t - self.start_ns) / self.span_ns

    def bar(
        self,
        start: float,
        end: float,
        y: float,
        height: float,
        fill: str,
        *,
        cls: str = "",
        attrs: str = "",
        edge: bool = False,
        tip: str | None = None,
        min_width: float = SLIVER_PCT,
    ) -> str:
        """The bar from ``start`` to ``end`` (as :func:`rect` draws one), never narrower
        than ``min_width`` percent."""
        left = self.x(start)
        width = max(self.x(end) - left, min_width)
        return rect(pct(left), y, pct(width), height, fill, cls=cls, attrs=attrs, edge=edge, tip=tip)

    def grid(self, axis_y: float, text_attrs: str = "") -> list[str]:
        """A grid line and a label per tick (labels at the ends anchored inside), the labels'
        baseline at ``axis_y``."""
        parts = []
        for tick, text in axis_ticks(self.span_ns / NS_PER_S):
            x = 100 * tick * NS_PER_S / self.span_ns
            anchor = "start" if x < 4 else "end" if x > 96 else "middle"
            parts.append(
                f'<line x1="{pct(x)}" x2="{pct(x)}" y1="{axis_y + 4}" y2="100%" stroke="#e4e4e4"/>'
                f'<text x="{pct(x)}" y="{axis_y}" text-anchor="{anchor}"{text_attrs}>{text}</text>'
            )
        return parts


def axis_ticks(span_s: float) -> list[tuple[float, str]]:
    """Round axis ticks from 0 to ``span_s`` seconds, 1, 2, 2.5 or 5 times a power of ten
    apart, at most seven of them (their labels fit a phone's width): (seconds, label).

    >>> [label for _, label in axis_ticks(13.5)]
    ['0.0 s', '2.5 s', '5.0 s', '7.5 s', '10.0 s', '12.5 s']
    >>> [label for _, label in axis_ticks(2.85)]
    ['0.0 s', '0.5 s', '1.0 s', '1.5 s', '2.0 s', '2.5 s']
    >>> [label for _, label in axis_ticks(120)]
    ['0 s', '20 s', '40 s', '60 s', '80 s', '100 s', '120 s']
    """
    if span_s < 1e-6:
        return [(0.0, "0 s")]
    power = 10.0 ** math.floor(math.log10(span_s / 6))
    m = next(m for m in (1, 2, 2.5, 5, 10) if span_s / (m * power) <= 6 + 1e-9)
    step = m * power
    digits = max(0, -math.floor(math.log10(step) + 1e-9)) + (m == 2.5)  # 2.5 needs one more
    return [(k * step, f"{k * step:.{digits}f} s") for k in range(int(span_s / step + 1e-9) + 1)]
