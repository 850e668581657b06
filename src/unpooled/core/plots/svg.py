r"""Small, dependency-free SVG charts: point/interval, line and scatter.

Every function returns the SVG document as a string.  All text is XML-escaped;
the ``<svg>`` element has ``role="img"`` and a ``<title>`` (and ``<desc>``) that
screen readers announce, and every data mark carries its own ``<title>`` (a
tooltip with its values).  Non-finite values are not drawn.

>>> svg = scatter([0.1, 0.5], [0.2, 0.4], title="True vs estimated")
>>> svg.startswith("<svg")
True
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from xml.sax.saxutils import escape

import numpy as np

from ..errors import InvalidInputError

#: Okabe-Ito colours (distinguishable with common colour-vision deficiencies).
PALETTE = ("#0072B2", "#D55E00", "#009E73", "#CC79A7", "#E69F00", "#56B4E9", "#F0E442", "#000000")
_FONT = 'font-family="sans-serif"'


def nice_ticks(lo: float, hi: float, n: int = 5) -> list[float]:
    """About ``n`` round tick values (1, 2 or 5 times a power of ten) covering ``[lo, hi]``."""
    if not (math.isfinite(lo) and math.isfinite(hi)):
        return []
    if hi < lo:
        lo, hi = hi, lo
    if hi == lo:
        return [lo]
    raw = (hi - lo) / max(n, 1)
    mag = 10 ** math.floor(math.log10(raw))
    step = next(s * mag for s in (1, 2, 5, 10) if s * mag >= raw)
    first = math.ceil(lo / step - 1e-9) * step
    ticks, t = [], first
    while t <= hi + step * 1e-9:
        ticks.append(round(t, 12) + 0.0)
        t += step
    return ticks


def _fmt(v: float) -> str:
    if v == 0:
        return "0"
    a = abs(v)
    if a >= 1e5 or a < 1e-3:
        return f"{v:.2g}"
    if float(v).is_integer():
        return f"{int(v):,}"
    return f"{v:.4g}"


def _num(x: float) -> str:
    return f"{x:.2f}".rstrip("0").rstrip(".")


def _array(name: str, values, n: int | None = None) -> np.ndarray:
    try:
        a = np.asarray(values, dtype=float)
    except (TypeError, ValueError):
        raise InvalidInputError(f"{name}: expected numbers, got {type(values).__name__}") from None
    if a.ndim != 1:
        raise InvalidInputError(f"{name}: expected a 1-d sequence of numbers, got shape {a.shape}")
    if n is not None and len(a) != n:
        raise InvalidInputError(f"{name}: expected {n} values, got {len(a)}")
    return a


def _size(name: str, v) -> int:
    if isinstance(v, bool) or not isinstance(v, (int, np.integer)) or v < 50:
        raise InvalidInputError(f"{name}: expected an integer of at least 50 pixels, got {v!r}")
    return int(v)


def _extent(arrays, *, include=(), pad: float = 0.04, value_range=None) -> tuple[float, float]:
    if value_range is not None:
        lo, hi = (float(v) for v in value_range)
        if not (math.isfinite(lo) and math.isfinite(hi) and lo < hi):
            raise InvalidInputError(f"value_range: expected (low, high) with low < high, got {value_range!r}")
        return lo, hi
    vals = [a[np.isfinite(a)] for a in arrays if a is not None] + [np.asarray(include, dtype=float)]
    vals = np.concatenate([v.ravel() for v in vals]) if vals else np.zeros(0)
    vals = vals[np.isfinite(vals)]
    if len(vals) == 0:
        return 0.0, 1.0
    lo, hi = float(vals.min()), float(vals.max())
    if lo == hi:
        d = abs(lo) * 0.1 or 1.0
        return lo - d, hi + d
    d = (hi - lo) * pad
    return lo - d, hi + d


class _Scale:
    """Linear map from data ``[lo, hi]`` to pixels ``[a, b]``."""

    def __init__(self, lo: float, hi: float, a: float, b: float) -> None:
        self.lo, self.hi, self.a, self.b = lo, hi, a, b

    def __call__(self, v: float) -> float:
        return self.a + (v - self.lo) / (self.hi - self.lo) * (self.b - self.a)


class _Doc:
    """Accumulates SVG elements; ``str()`` gives the document."""

    def __init__(self, width: int, height: int, title: str, desc: str = "") -> None:
        self.width, self.height = width, height
        self.parts = [
            (f'<svg xmlns="http://www.w3.org/2000/svg" width="{width}" height="{height}" '
             f'viewBox="0 0 {width} {height}" role="img" aria-labelledby="chart-title chart-desc">'),
            f'<title id="chart-title">{escape(title or "chart")}</title>',
            f'<desc id="chart-desc">{escape(desc)}</desc>',
            f'<rect x="0" y="0" width="{width}" height="{height}" fill="#ffffff"/>',
        ]

    def add(self, s: str) -> None:
        self.parts.append(s)

    def text(self, x: float, y: float, s: str, *, anchor: str = "middle", size: int = 12, rotate: float = 0,
             weight: str = "normal", fill: str = "#222222") -> None:
        rot = f' transform="rotate({_num(rotate)} {_num(x)} {_num(y)})"' if rotate else ""
        self.add(f'<text x="{_num(x)}" y="{_num(y)}" text-anchor="{anchor}" font-size="{size}" {_FONT} '
                 f'font-weight="{weight}" fill="{fill}"{rot}>{escape(str(s))}</text>')

    def line(self, x1, y1, x2, y2, *, stroke="#888888", width: float = 1, dash: str = "", tip: str = "") -> None:
        d = f' stroke-dasharray="{dash}"' if dash else ""
        body = f"<title>{escape(tip)}</title></line>" if tip else ""
        end = ">" + body if tip else "/>"
        self.add(f'<line x1="{_num(x1)}" y1="{_num(y1)}" x2="{_num(x2)}" y2="{_num(y2)}" stroke="{stroke}" '
                 f'stroke-width="{_num(width)}"{d}{end}')

    def circle(self, x, y, r, *, fill, tip: str = "", stroke: str = "none") -> None:
        self.add(f'<circle cx="{_num(x)}" cy="{_num(y)}" r="{_num(r)}" fill="{fill}" stroke="{stroke}">'
                 f"<title>{escape(tip)}</title></circle>")

    def marker(self, x, y, *, fill, tip: str = "", size: float = 5) -> None:
        """A diamond (the second series, e.g. the truth)."""
        pts = " ".join(f"{_num(px)},{_num(py)}" for px, py in
                       ((x, y - size), (x + size, y), (x, y + size), (x - size, y)))
        self.add(f'<polygon points="{pts}" fill="none" stroke="{fill}" stroke-width="1.5">'
                 f"<title>{escape(tip)}</title></polygon>")

    def __str__(self) -> str:
        return "\n".join(self.parts + ["</svg>"]) + "\n"


def _axis(doc: _Doc, scale: _Scale, *, horizontal: bool, at: float, span: tuple[float, float], label: str,
          n_ticks: int = 5, grid: bool = True) -> None:
    """Ticks, tick labels, grid lines and the axis label of one value axis."""
    for t in nice_ticks(scale.lo, scale.hi, n_ticks):
        p = scale(t)
        if horizontal:
            if grid:
                doc.line(p, span[0], p, span[1], stroke="#e5e5e5")
            doc.line(p, at, p, at + 4, stroke="#444444")
            doc.text(p, at + 16, _fmt(t), size=11)
        else:
            if grid:
                doc.line(span[0], p, span[1], p, stroke="#e5e5e5")
            doc.line(at - 4, p, at, p, stroke="#444444")
            doc.text(at - 7, p + 4, _fmt(t), anchor="end", size=11)
    if horizontal:
        doc.line(scale.a, at, scale.b, at, stroke="#444444")
        if label:
            doc.text((scale.a + scale.b) / 2, at + 34, label)
    else:
        doc.line(at, scale.a, at, scale.b, stroke="#444444")
        if label:
            doc.text(at - 44, (scale.a + scale.b) / 2, label, rotate=-90)


def _legend(doc: _Doc, entries: Sequence[tuple[str, str, str]], x: float, y: float) -> None:
    """Legend entries ``(kind, colour, label)``, kind ``point``, ``marker``, ``line`` or ``dash``, from (x, y)."""
    doc.add('<g class="legend">')
    for kind, colour, label in entries:
        if kind == "point":
            doc.add(f'<circle cx="{_num(x + 6)}" cy="{_num(y - 4)}" r="4" fill="{colour}"/>')
        elif kind == "marker":
            doc.add(f'<polygon points="{_num(x + 6)},{_num(y - 9)} {_num(x + 11)},{_num(y - 4)} {_num(x + 6)},'
                    f'{_num(y + 1)} {_num(x + 1)},{_num(y - 4)}" fill="none" stroke="{colour}" stroke-width="1.5"/>')
        else:
            dash = ' stroke-dasharray="5 3"' if kind == "dash" else ""
            doc.add(f'<line x1="{_num(x)}" y1="{_num(y - 4)}" x2="{_num(x + 14)}" y2="{_num(y - 4)}" '
                    f'stroke="{colour}" stroke-width="2"{dash}/>')
        doc.text(x + 18, y, label, anchor="start", size=11)
        x += 30 + 6.5 * len(label)
    doc.add("</g>")


def _references(reference) -> list[tuple[float, str]]:
    if reference is None:
        return []
    out = []
    for item in reference:
        if isinstance(item, (int, float, np.floating, np.integer)):
            out.append((float(item), ""))
        else:
            v, lab = item
            out.append((float(v), str(lab)))
    return out


def interval_chart(labels: Sequence[str], values, low=None, high=None, *, truth=None,
                   orientation: str = "horizontal", title: str = "", value_label: str = "",
                   series_label: str = "estimate", truth_label: str = "truth", reference=None,
                   item_label: str = "", value_range=None, width: int = 640, height: int | None = None,
                   max_labels: int = 40) -> str:
    r"""A point with an interval bar per item, optionally a second "truth" marker per item.

    Parameters
    ----------
    labels : sequence of str
        One label per item (a row when horizontal, a column when vertical).
    values : array_like, shape (n,)
        The points.
    low, high : array_like, shape (n,), optional
        Interval ends (both or neither).
    truth : array_like, shape (n,), optional
        A second series drawn as open diamonds.
    orientation : {'horizontal', 'vertical'}
        ``horizontal``: items are rows and values run left to right; ``vertical``:
        items are columns and values run bottom to top.
    title, value_label, series_label, truth_label, item_label : str
        ``item_label`` names the item axis (e.g. "rank").
    reference : sequence of float or (float, str), optional
        Dashed reference lines at these values (e.g. zero, or a gap), with legend labels.
    value_range : (float, float), optional
        The value axis limits; default from the data.
    width, height : int
        Pixels; the default height grows with the number of rows (horizontal) or is 400.
    max_labels : int, default 40
        At most this many item labels are written (every k-th); every mark keeps its tooltip.

    Returns
    -------
    str
        The SVG document.
    """
    labels = [str(s) for s in labels]
    n = len(labels)
    v = _array("values", values, n)
    if (low is None) != (high is None):
        raise InvalidInputError("low, high: expected both or neither")
    lo = _array("low", low, n) if low is not None else None
    hi = _array("high", high, n) if high is not None else None
    tr = _array("truth", truth, n) if truth is not None else None
    if orientation not in ("horizontal", "vertical"):
        raise InvalidInputError(f"orientation: expected 'horizontal' or 'vertical', got {orientation!r}")
    refs = _references(reference)
    horizontal = orientation == "horizontal"
    width = _size("width", width)
    height = _size("height", height if height is not None else (70 + 18 * max(n, 1) + 60 if horizontal else 400))
    vmin, vmax = _extent([v, lo, hi, tr], include=[r for r, _ in refs], value_range=value_range)
    desc = f"{n} items; {series_label}" + (" with intervals" if lo is not None else "") + \
        (f" and {truth_label}" if tr is not None else "")
    doc = _Doc(width, height, title, desc)
    if title:
        doc.text(width / 2, 22, title, size=14, weight="bold")
    longest = max((len(s) for s in labels), default=0)
    if horizontal:
        left, right, top, bottom = min(20 + 7 * longest, width * 0.4) + (18 if item_label else 0), 20, 44, 62
        scale = _Scale(vmin, vmax, left, width - right)
        band = (height - top - bottom) / max(n, 1)
        _axis(doc, scale, horizontal=True, at=height - bottom, span=(top, height - bottom), label=value_label)
        pos = [top + band * (i + 0.5) for i in range(n)]
        if item_label:
            doc.text(14, (top + height - bottom) / 2, item_label, rotate=-90)
    else:
        left, right, top, bottom = 64, 20, 44, 40 + min(6.0 * longest, 90) + (16 if item_label else 0)
        scale = _Scale(vmin, vmax, height - bottom, top)
        band = (width - left - right) / max(n, 1)
        _axis(doc, scale, horizontal=False, at=left, span=(left, width - right), label=value_label)
        pos = [left + band * (i + 0.5) for i in range(n)]
        doc.line(left, height - bottom, width - right, height - bottom, stroke="#444444")
        if item_label:
            doc.text((left + width - right) / 2, height - 10, item_label)
    every = max(1, math.ceil(n / max(max_labels, 1)))
    for r_, (rv, rl) in enumerate(refs):
        p = scale(rv)
        colour = PALETTE[(2 + r_) % len(PALETTE)]
        tip = f"{rl}: {_fmt(rv)}" if rl else _fmt(rv)
        if horizontal:
            doc.line(p, top, p, height - bottom, stroke=colour, width=1.5, dash="5 3", tip=tip)
        else:
            doc.line(left, p, width - right, p, stroke=colour, width=1.5, dash="5 3", tip=tip)
    doc.add('<g class="items">')
    for i, (name, c) in enumerate(zip(labels, pos)):
        if i % every == 0:
            if horizontal:
                doc.text(left - 8, c + 4, name, anchor="end", size=11)
            else:
                y = height - bottom + 14
                if longest > 3:
                    doc.text(c, y, name, anchor="end", size=10, rotate=-60)
                else:
                    doc.text(c, y, name, size=10)
        tip = f"{name}: {series_label} {_fmt(v[i])}" if math.isfinite(v[i]) else f"{name}: no {series_label}"
        if lo is not None and math.isfinite(lo[i]) and math.isfinite(hi[i]):
            tip += f" [{_fmt(lo[i])}, {_fmt(hi[i])}]"
            a, b = scale(lo[i]), scale(hi[i])
            if horizontal:
                doc.line(a, c, b, c, stroke=PALETTE[0], width=2, tip=tip)
            else:
                doc.line(c, a, c, b, stroke=PALETTE[0], width=2, tip=tip)
        if math.isfinite(v[i]):
            x, y = (scale(v[i]), c) if horizontal else (c, scale(v[i]))
            doc.circle(x, y, 3.5 if n <= 80 else 2.5, fill=PALETTE[0], tip=tip)
        if tr is not None and math.isfinite(tr[i]):
            x, y = (scale(tr[i]), c) if horizontal else (c, scale(tr[i]))
            doc.marker(x, y, fill=PALETTE[1], tip=f"{name}: {truth_label} {_fmt(tr[i])}")
    doc.add("</g>")
    entries = [("point", PALETTE[0], series_label)]
    if tr is not None:
        entries.append(("marker", PALETTE[1], truth_label))
    entries += [("dash", PALETTE[(2 + k) % len(PALETTE)], rl) for k, (_, rl) in enumerate(refs) if rl]
    _legend(doc, entries, 12, 38 if title else 18)
    return str(doc)


def grid(charts: Sequence[str], *, columns: int, title: str = "", desc: str = "", gap: int = 6) -> str:
    r"""Several charts of this module in one SVG document, ``columns`` a row, under a common title.

    Each chart keeps its own axes, legend and tooltips (it is nested as an ``<svg>`` element, its ids made
    unique); a row is as tall as its tallest chart.

    >>> g = grid([scatter([0.1], [0.2], title="a"), scatter([0.3], [0.4], title="b")], columns=2, title="ab")
    >>> g.count("<svg") == 3 and 'id="chart-title-1"' in g
    True
    """
    import re

    if isinstance(columns, bool) or not isinstance(columns, (int, np.integer)) or columns < 1:
        raise InvalidInputError(f"columns: expected a positive integer, got {columns!r}")
    if not charts:
        raise InvalidInputError("charts: expected at least one chart")
    sizes = []
    for k, c in enumerate(charts):
        m = re.match(r'<svg [^>]*width="(\d+)" height="(\d+)"', c)
        if m is None:
            raise InvalidInputError(f"charts[{k}]: expected an SVG document made by this module")
        sizes.append((int(m.group(1)), int(m.group(2))))
    rows = [list(range(i, min(i + columns, len(charts)))) for i in range(0, len(charts), columns)]
    col_w = [max(sizes[k][0] for k in range(j, len(charts), columns)) for j in range(min(columns, len(charts)))]
    row_h = [max(sizes[k][1] for k in row) for row in rows]
    top = 34 if title else 0
    width = sum(col_w) + gap * (len(col_w) - 1)
    height = top + sum(row_h) + gap * (len(rows) - 1)
    doc = _Doc(width, height, title, desc)
    if title:
        doc.text(width / 2, 22, title, size=15, weight="bold")
    y = top
    for r, row in enumerate(rows):
        x = 0
        for j, k in enumerate(row):
            inner = charts[k].strip()
            inner = (inner.replace('id="chart-title"', f'id="chart-title-{k}"')
                     .replace('id="chart-desc"', f'id="chart-desc-{k}"')
                     .replace('aria-labelledby="chart-title chart-desc"',
                              f'aria-labelledby="chart-title-{k} chart-desc-{k}"'))
            doc.add(f'<svg x="{_num(x)}" y="{_num(y)}"' + inner[len("<svg"):])
            x += col_w[j] + gap
        y += row_h[r] + gap
    return str(doc)


def line_chart(x, series: Mapping[str, object], *, title: str = "", xlabel: str = "", ylabel: str = "",
               reference=None, markers: bool = True, width: int = 640, height: int = 400,
               y_range=None) -> str:
    r"""Several series over a common ``x`` (e.g. cumulative labels vs number of systems).

    Parameters
    ----------
    x : array_like, shape (n,)
    series : mapping of str to array_like, shape (n,)
        Name (the legend label) to y values; non-finite values break the line.
    title, xlabel, ylabel : str
    reference : sequence of float or (float, str), optional
        Dashed horizontal lines.
    markers : bool, default True
        Draw a point (with a tooltip) at every value.
    width, height : int
    y_range : (float, float), optional

    Returns
    -------
    str
    """
    xs = _array("x", x)
    n = len(xs)
    if not series:
        raise InvalidInputError("series: expected at least one series, got none")
    ys = {str(k): _array(f"series[{k!r}]", v, n) for k, v in series.items()}
    refs = _references(reference)
    width, height = _size("width", width), _size("height", height)
    doc = _Doc(width, height, title, f"line chart of {', '.join(ys)} against {xlabel or 'x'}")
    if title:
        doc.text(width / 2, 22, title, size=14, weight="bold")
    left, right, top, bottom = 70, 20, 48, 52
    sx = _Scale(*_extent([xs], pad=0.02), left, width - right)
    sy = _Scale(*_extent(list(ys.values()), include=[r for r, _ in refs], value_range=y_range), height - bottom, top)
    _axis(doc, sx, horizontal=True, at=height - bottom, span=(top, height - bottom), label=xlabel)
    _axis(doc, sy, horizontal=False, at=left, span=(left, width - right), label=ylabel)
    for k, (rv, rl) in enumerate(refs):
        doc.line(left, sy(rv), width - right, sy(rv), stroke="#555555", width=1.2, dash="5 3",
                 tip=f"{rl}: {_fmt(rv)}" if rl else _fmt(rv))
    for j, (name, y) in enumerate(ys.items()):
        colour = PALETTE[j % len(PALETTE)]
        doc.add(f'<g class="series"><title>{escape(name)}</title>')
        ok = np.isfinite(xs) & np.isfinite(y)
        runs, cur = [], []
        for i in range(n):
            if ok[i]:
                cur.append(f"{_num(sx(xs[i]))},{_num(sy(y[i]))}")
            elif cur:
                runs.append(cur)
                cur = []
        if cur:
            runs.append(cur)
        for pts in runs:
            doc.add(f'<polyline points="{" ".join(pts)}" fill="none" stroke="{colour}" stroke-width="2"/>')
        if markers:
            for i in np.flatnonzero(ok):
                doc.circle(sx(xs[i]), sy(y[i]), 2.5, fill=colour, tip=f"{name}: {_fmt(xs[i])}, {_fmt(y[i])}")
        doc.add("</g>")
    entries = [("line", PALETTE[j % len(PALETTE)], name) for j, name in enumerate(ys)]
    entries += [("dash", "#555555", rl) for _, rl in refs if rl]
    _legend(doc, entries, left, 40 if title else 18)
    return str(doc)


def scatter(x, y, *, labels: Sequence[str] | None = None, title: str = "", xlabel: str = "", ylabel: str = "",
            diagonal: bool = False, reference=None, groups: Sequence[str] | None = None,
            width: int = 480, height: int = 480, x_range=None, y_range=None) -> str:
    r"""Points ``(x_i, y_i)`` (e.g. true vs estimated), optionally with the diagonal ``y = x``.

    Parameters
    ----------
    x, y : array_like, shape (n,)
    labels : sequence of str, optional
        Per point, shown in its tooltip.
    title, xlabel, ylabel : str
    diagonal : bool, default False
        Draw ``y = x`` (and use one range for both axes unless ranges are given).
    reference : sequence of float or (float, str), optional
        Dashed horizontal lines.
    groups : sequence of str, optional
        Per point, a group name: one colour and legend entry per group.
    width, height : int
    x_range, y_range : (float, float), optional

    Returns
    -------
    str
    """
    xs = _array("x", x)
    n = len(xs)
    ys = _array("y", y, n)
    if labels is not None and len(labels) != n:
        raise InvalidInputError(f"labels: expected {n} labels, got {len(labels)}")
    if groups is not None and len(groups) != n:
        raise InvalidInputError(f"groups: expected {n} group names, got {len(groups)}")
    refs = _references(reference)
    width, height = _size("width", width), _size("height", height)
    doc = _Doc(width, height, title, f"scatter of {n} points: {ylabel or 'y'} against {xlabel or 'x'}")
    if title:
        doc.text(width / 2, 22, title, size=14, weight="bold")
    left, right, top, bottom = 70, 20, 48, 52
    if diagonal and x_range is None and y_range is None:
        x_range = y_range = _extent([xs, ys], include=[r for r, _ in refs])
    sx = _Scale(*_extent([xs], value_range=x_range), left, width - right)
    sy = _Scale(*_extent([ys], include=[r for r, _ in refs], value_range=y_range), height - bottom, top)
    _axis(doc, sx, horizontal=True, at=height - bottom, span=(top, height - bottom), label=xlabel)
    _axis(doc, sy, horizontal=False, at=left, span=(left, width - right), label=ylabel)
    if diagonal:
        a = max(sx.lo, sy.lo)
        b = min(sx.hi, sy.hi)
        if a < b:
            doc.line(sx(a), sy(a), sx(b), sy(b), stroke="#777777", width=1.2, dash="4 3", tip="y = x")
    for rv, rl in refs:
        doc.line(left, sy(rv), width - right, sy(rv), stroke="#555555", width=1.2, dash="5 3",
                 tip=f"{rl}: {_fmt(rv)}" if rl else _fmt(rv))
    names = list(dict.fromkeys(groups)) if groups is not None else []
    doc.add('<g class="points">')
    for i in np.flatnonzero(np.isfinite(xs) & np.isfinite(ys)):
        colour = PALETTE[names.index(groups[i]) % len(PALETTE)] if groups is not None else PALETTE[0]
        who = f"{labels[i]}: " if labels is not None else ""
        doc.circle(sx(xs[i]), sy(ys[i]), 3.5, fill=colour, tip=f"{who}{_fmt(xs[i])}, {_fmt(ys[i])}")
    doc.add("</g>")
    entries = [("point", PALETTE[k % len(PALETTE)], g) for k, g in enumerate(names)]
    entries += [("dash", "#555555", rl) for _, rl in refs if rl]
    if entries:
        _legend(doc, entries, left, 40 if title else 18)
    return str(doc)


def unit_range(arrays) -> tuple[float, float]:
    """The part of [0, 1] an axis of rates shows: every finite value of ``arrays`` (``None`` skipped), its ends on
    round ticks, from 0 when the values start within two ticks of it; recalls of 0.01-0.05 then fill the axis
    instead of sitting in one corner of [0, 1] (UX review #7)."""
    vals = [np.asarray(a, dtype=float).ravel() for a in arrays if a is not None]
    v = np.concatenate(vals) if vals else np.zeros(0)
    v = np.clip(v[np.isfinite(v)], 0.0, 1.0)
    if len(v) == 0:
        return 0.0, 1.0
    lo, hi = float(v.min()), float(v.max())
    ticks = nice_ticks(lo, hi, 5) if hi > lo else []
    step = ticks[1] - ticks[0] if len(ticks) > 1 else 0.1
    lo, hi = round(math.floor(lo / step + 1e-9) * step, 12), round(math.ceil(hi / step - 1e-9) * step, 12)
    if lo < 2 * step:
        lo = 0.0
    lo, hi = max(0.0, lo), min(1.0, hi)
    return (lo, hi) if hi > lo else (max(0.0, lo - step), min(1.0, lo + step))


#: where an item's number may go beside its point (pixels right and down of it), in order of preference
_LABEL_SPOTS = ((6, -6), (6, 12), (-14, -6), (-14, 12), (6, -18), (6, 24), (-14, -18), (-14, 24))


def _free_spot(px: float, py: float, placed: list[tuple[float, float]], gap: float = 11.0) -> tuple[float, float]:
    """The first of :data:`_LABEL_SPOTS` around ``(px, py)`` that keeps ``gap`` pixels from every number ``placed``
    (the first spot when none does)."""
    for dx, dy in _LABEL_SPOTS:
        x, y = px + dx, py + dy
        if all(abs(x - a) >= gap or abs(y - b) >= gap for a, b in placed):
            return x, y
    return px + _LABEL_SPOTS[0][0], py + _LABEL_SPOTS[0][1]


def pr_chart(labels: Sequence[str], x, x_low, x_high, y, y_low, y_high, *, truth_x=None, truth_y=None,
             title: str = "", xlabel: str = "recall", ylabel: str = "precision", truth_label: str = "truth",
             width: int = 480, height: int = 440) -> str:
    r"""One cross per item: the point ``(x_i, y_i)`` with its interval on each axis (e.g. recall, precision).

    Each axis shows the part of [0, 1] the values need (:func:`unit_range`).  Each item gets its own colour
    (cycling through :data:`PALETTE`) and a number beside its point, clear of the numbers before it, keyed in the
    legend below the plot; an optional second point per item (``truth_x``, ``truth_y``) is an open diamond in the
    item's colour, joined to its estimate by a thin line.

    Parameters
    ----------
    labels : sequence of str
        One name per item (legend and tooltips).
    x, x_low, x_high, y, y_low, y_high : array_like, shape (n,)
        The points and their interval ends; a non-finite end draws no bar on that axis.
    truth_x, truth_y : array_like, shape (n,), optional
        Both or neither.
    title, xlabel, ylabel, truth_label : str
    width, height : int
        Pixels of the plot area and axes; the legend adds 16 px per item below.

    Returns
    -------
    str
        The SVG document.
    """
    labels = [str(s) for s in labels]
    n = len(labels)
    xs, xl, xh = (_array(nm, a, n) for nm, a in (("x", x), ("x_low", x_low), ("x_high", x_high)))
    ys, yl, yh = (_array(nm, a, n) for nm, a in (("y", y), ("y_low", y_low), ("y_high", y_high)))
    if (truth_x is None) != (truth_y is None):
        raise InvalidInputError("truth_x, truth_y: expected both or neither")
    tx = _array("truth_x", truth_x, n) if truth_x is not None else None
    ty = _array("truth_y", truth_y, n) if truth_y is not None else None
    width, height = _size("width", width), _size("height", height)
    total = height + 16 * n + (16 if tx is not None else 0) + 8
    doc = _Doc(width, total, title, f"{ylabel} against {xlabel} of {n} items with intervals on both axes"
               + (f" and {truth_label}" if tx is not None else ""))
    if title:
        doc.text(width / 2, 22, title, size=14, weight="bold")
    left, right, top, bottom = 64, 20, 40, 52
    sx = _Scale(*unit_range([xs, xl, xh, tx]), left, width - right)
    sy = _Scale(*unit_range([ys, yl, yh, ty]), height - bottom, top)
    _axis(doc, sx, horizontal=True, at=height - bottom, span=(top, height - bottom), label=xlabel)
    _axis(doc, sy, horizontal=False, at=left, span=(left, width - right), label=ylabel)

    def fin(*v):
        return all(math.isfinite(float(a)) for a in v)

    placed: list[tuple[float, float]] = []  # the item numbers written so far: the next one goes where they are not
    doc.add('<g class="items">')
    for i, name in enumerate(labels):
        colour = PALETTE[i % len(PALETTE)]
        tip = f"{name}: {ylabel} {_fmt(ys[i])} [{_fmt(yl[i])}, {_fmt(yh[i])}], {xlabel} {_fmt(xs[i])} " \
              f"[{_fmt(xl[i])}, {_fmt(xh[i])}]"
        if not fin(xs[i], ys[i]):
            continue
        px, py = sx(xs[i]), sy(ys[i])
        if tx is not None and fin(tx[i], ty[i]):
            doc.line(px, py, sx(tx[i]), sy(ty[i]), stroke=colour, width=0.8, dash="2 2")
            doc.marker(sx(tx[i]), sy(ty[i]), fill=colour,
                       tip=f"{name}: {truth_label} {ylabel} {_fmt(ty[i])}, {xlabel} {_fmt(tx[i])}")
        if fin(xl[i], xh[i]):
            doc.line(sx(xl[i]), py, sx(xh[i]), py, stroke=colour, width=1.8, tip=tip)
        if fin(yl[i], yh[i]):
            doc.line(px, sy(yl[i]), px, sy(yh[i]), stroke=colour, width=1.8, tip=tip)
        doc.circle(px, py, 3.5, fill=colour, tip=tip)
        lx, ly = _free_spot(px, py, placed)
        placed.append((lx, ly))
        doc.text(lx, ly, str(i + 1), anchor="start", size=10, fill=colour)
    doc.add("</g>")
    _numbered_legend(doc, labels, left, height + 4, truth_label if tx is not None else None)
    return str(doc)


def _numbered_legend(doc: _Doc, labels: Sequence[str], left: float, y0: float, truth_label: str | None) -> None:
    """One line per item below a plot, its colour and number (as beside its point) and its name; then, with
    ``truth_label``, the open diamond of the second points."""
    doc.add('<g class="legend">')
    for i, name in enumerate(labels):
        colour = PALETTE[i % len(PALETTE)]
        doc.add(f'<circle cx="{_num(left + 4)}" cy="{_num(y0 + 16 * i - 4)}" r="4" fill="{colour}"/>')
        doc.text(left + 14, y0 + 16 * i, f"{i + 1}  {name}", anchor="start", size=11)
    if truth_label is not None:
        yy = y0 + 16 * len(labels)
        doc.add(f'<polygon points="{_num(left + 4)},{_num(yy - 9)} {_num(left + 9)},{_num(yy - 4)} '
                f'{_num(left + 4)},{_num(yy + 1)} {_num(left - 1)},{_num(yy - 4)}" fill="none" stroke="#444444" '
                f'stroke-width="1.5"/>')
        doc.text(left + 14, yy, truth_label, anchor="start", size=11)
    doc.add("</g>")


__all__ = ["PALETTE", "interval_chart", "line_chart", "nice_ticks", "pr_chart", "scatter", "unit_range"]


def bar_chart(categories: Sequence[str], series: Mapping[str, object], *, title: str = "", xlabel: str = "",
              ylabel: str = "", horizontal: bool = False, log: bool = False, width: int = 640,
              height: int | None = None, colours: Mapping[str, str] | None = None) -> str:
    r"""Grouped bars: one group per category, one bar (colour, legend entry) per series.

    Parameters
    ----------
    categories : sequence of str
    series : mapping of str to array_like, shape (n,)
        Name (the legend label) to non-negative values; non-finite values are not drawn.
    title, xlabel, ylabel : str
        ``ylabel`` names the value axis (horizontal when ``horizontal``).
    horizontal : bool, default False
        Categories as rows (long labels) instead of columns.
    log : bool, default False
        A log10 value axis (bars start at 1; zeros are not drawn).
    width, height : int
        Pixels; the default height is 400, or grows with the rows when horizontal.
    colours : mapping of str to str, optional
        A colour per series name (so several charts keep one colour per series); default the palette in order.

    Returns
    -------
    str
    """
    cats = [str(c) for c in categories]
    n = len(cats)
    if not series:
        raise InvalidInputError("series: expected at least one series, got none")
    vals = {str(k): _array(f"series[{k!r}]", v, n) for k, v in series.items()}
    for k, v in vals.items():
        if np.any(v[np.isfinite(v)] < 0):
            raise InvalidInputError(f"series[{k!r}]: expected non-negative values")
    m = len(vals)
    colour_of = {k: (colours or {}).get(k, PALETTE[j % len(PALETTE)]) for j, k in enumerate(vals)}
    width = _size("width", width)
    height = _size("height", height if height is not None else
                   (90 + max(n, 1) * (6 + 9 * m) + 40 if horizontal else 400))
    doc = _Doc(width, height, title, f"bar chart of {', '.join(vals)} by {xlabel or 'category'}")
    if title:
        doc.text(width / 2, 22, title, size=14, weight="bold")
    allv = np.concatenate([v[np.isfinite(v)] for v in vals.values()] + [np.zeros(0)])
    if log:
        pos = allv[allv > 0]
        top_v = max(math.log10(pos.max()) * 1.05, 1.0) if len(pos) else 1.0
        tr = lambda v: math.log10(v) if v > 0 else float("nan")  # noqa: E731
        lo_v, hi_v = -0.3, float(top_v)   # a count of 1 still shows a bar
    else:
        tr = float
        lo_v, hi_v = 0.0, (float(allv.max()) * 1.05 if len(allv) and allv.max() > 0 else 1.0)
    longest = max((len(c) for c in cats), default=0)
    legend_y = 40 if title else 18
    if horizontal:
        left, right, top, bottom = min(20 + 6.5 * longest, width * 0.4), 20, legend_y + 14, 52
        scale = _Scale(lo_v, hi_v, left, width - right)
        band = (height - top - bottom) / max(n, 1)
    else:
        left, right, top, bottom = 70, 20, legend_y + 14, 56 + (min(6.0 * longest, 80) if longest > 6 else 0)
        scale = _Scale(lo_v, hi_v, height - bottom, top)
        band = (width - left - right) / max(n, 1)
    if log:
        for t in range(int(math.floor(hi_v)) + 1):
            p = scale(t)
            lab = _fmt(10.0 ** t)
            if horizontal:
                doc.line(p, top, p, height - bottom, stroke="#e5e5e5")
                doc.text(p, height - bottom + 16, lab, size=11)
            else:
                doc.line(left, p, width - right, p, stroke="#e5e5e5")
                doc.text(left - 7, p + 4, lab, anchor="end", size=11)
        if horizontal:
            doc.line(left, height - bottom, width - right, height - bottom, stroke="#444444")
            if ylabel:
                doc.text((left + width - right) / 2, height - bottom + 34, ylabel)
        else:
            doc.line(left, top, left, height - bottom, stroke="#444444")
            if ylabel:
                doc.text(left - 50, (top + height - bottom) / 2, ylabel, rotate=-90)
    elif horizontal:
        _axis(doc, scale, horizontal=True, at=height - bottom, span=(top, height - bottom), label=ylabel)
    else:
        _axis(doc, scale, horizontal=False, at=left, span=(left, width - right), label=ylabel)
    inner = band * 0.8 / m
    doc.add('<g class="bars">')
    for i, c in enumerate(cats):
        start = (top if horizontal else left) + band * i + band * 0.1
        if horizontal:
            doc.text(left - 6, start + band * 0.4 + 4, c, anchor="end", size=11)
        else:
            y = height - bottom + 14
            if longest > 6:
                doc.text(start + band * 0.4, y, c, anchor="end", size=10, rotate=-45)
            else:
                doc.text(start + band * 0.4, y, c, size=11)
        for j, (name, v) in enumerate(vals.items()):
            val = v[i]
            t = tr(val) if math.isfinite(val) else float("nan")
            if not math.isfinite(t):
                continue
            a, b = scale(lo_v), scale(max(t, lo_v))
            colour = colour_of[name]
            tip = escape(f"{c}: {name} {_fmt(val)}")
            off = start + inner * j
            if horizontal:
                doc.add(f'<rect x="{_num(a)}" y="{_num(off)}" width="{_num(max(b - a, 0.5))}" '
                        f'height="{_num(inner)}" fill="{colour}"><title>{tip}</title></rect>')
            else:
                doc.add(f'<rect x="{_num(off)}" y="{_num(b)}" width="{_num(inner)}" '
                        f'height="{_num(max(a - b, 0.5))}" fill="{colour}"><title>{tip}</title></rect>')
    doc.add("</g>")
    if not horizontal:
        doc.line(left, height - bottom, width - right, height - bottom, stroke="#444444")
        if xlabel:
            doc.text((left + width - right) / 2, height - 8, xlabel, size=11)
    _legend(doc, [("point", colour_of[name], name) for name in vals], left, legend_y)
    return str(doc)


__all__ = ["PALETTE", "bar_chart", "interval_chart", "line_chart", "nice_ticks", "scatter"]
