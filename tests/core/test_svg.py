"""The SVG charts: well-formed XML, escaped text, accessible titles, marks per data point."""

from __future__ import annotations

import math
import xml.etree.ElementTree as ET

import pytest

from unpooled.core.errors import InvalidInputError
from unpooled.core.plots import interval_chart, line_chart, nice_ticks, scatter

NS = "{http://www.w3.org/2000/svg}"
NASTY = 'a<b> & "c" \'d\' </svg><script>x</script>'


def parse(svg: str) -> ET.Element:
    root = ET.fromstring(svg)
    assert root.tag == f"{NS}svg"
    assert root.get("role") == "img" and root.get("aria-labelledby")
    assert root[0].tag == f"{NS}title"
    return root


def texts(root) -> list[str]:
    return ["".join(e.itertext()) for e in root.iter(f"{NS}text")]


def tips(root, tag) -> list[str]:
    return [e.find(f"{NS}title").text for e in root.iter(f"{NS}{tag}") if e.find(f"{NS}title") is not None]


def test_interval_chart_horizontal():
    svg = interval_chart(["sys1", "sys2", NASTY], [0.2, 0.5, 0.4], [0.1, 0.4, 0.3], [0.3, 0.6, 0.5],
                         truth=[0.25, 0.45, math.nan], title=NASTY, value_label="precision",
                         reference=[(0.0, "zero")], width=500)
    root = parse(svg)
    assert root.get("width") == "500" and int(root.get("height")) > 100
    assert root[0].text == NASTY
    assert NASTY in texts(root)  # the title and the item label, unescaped back
    assert "<script>" not in svg
    circles = tips(root, "circle")
    assert len(circles) == 3 and circles[0] == "sys1: estimate 0.2 [0.1, 0.3]"
    assert len(tips(root, "polygon")) == 2  # NaN truth is not drawn
    assert any(t == "zero: 0" for t in tips(root, "line"))
    assert {"estimate", "truth", "zero"} <= set(texts(root))


def test_interval_chart_vertical_without_intervals():
    labels = [str(i) for i in range(1, 71)]
    svg = interval_chart(labels, [i / 100 for i in range(70)], orientation="vertical", item_label="rank",
                         reference=[0.3], max_labels=10, height=300)
    root = parse(svg)
    assert root.get("height") == "300"
    assert len(tips(root, "circle")) == 70
    item_labels = [t for t in texts(root) if t in labels]
    assert len(item_labels) == 10  # every 7th of 70
    assert "rank" in texts(root)


def test_line_chart():
    svg = line_chart([1, 2, 3, 4], {"fixed": [500, 1000, 1500, 2000], "adaptive & <joint>": [500, 900, math.nan, 1400]},
                     title="Labels", xlabel="systems", ylabel="labels", reference=[(1000, "budget")])
    root = parse(svg)
    polylines = list(root.iter(f"{NS}polyline"))
    assert len(polylines) == 3  # one for fixed, two pieces for the series broken by NaN
    assert len(tips(root, "circle")) == 7
    assert "adaptive & <joint>" in texts(root) and "budget" in texts(root)
    assert "1,000" in texts(root)  # tick labels


def test_scatter():
    svg = scatter([0.1, 0.2, 0.5, math.inf], [0.12, 0.18, 0.4, 0.3], labels=["x", "y", NASTY, "w"], diagonal=True,
                  groups=["g1", "g2", "g1", "g1"], title="true vs estimated", xlabel="true", ylabel="estimated")
    root = parse(svg)
    pts = tips(root, "circle")
    assert len(pts) == 3 and pts[2] == f"{NASTY}: 0.5, 0.4"
    assert "y = x" in tips(root, "line")
    assert {"g1", "g2", "true", "estimated"} <= set(texts(root))


def test_empty_and_constant_data():
    parse(interval_chart([], []))
    parse(scatter([1, 1], [2, 2]))
    parse(line_chart([0], {"a": [math.nan]}))


@pytest.mark.parametrize("lo, hi, expected", [(0, 1, [0, 0.2, 0.4, 0.6, 0.8, 1.0]), (0, 7000, [0, 2000, 4000, 6000]),
                                              (-0.03, 0.07, [-0.02, 0, 0.02, 0.04, 0.06]), (2, 2, [2])])
def test_nice_ticks(lo, hi, expected):
    assert nice_ticks(lo, hi) == pytest.approx(expected)


def test_invalid_inputs():
    with pytest.raises(InvalidInputError, match="values: expected 2 values, got 3"):
        interval_chart(["a", "b"], [1, 2, 3])
    with pytest.raises(InvalidInputError, match="low, high: expected both or neither"):
        interval_chart(["a"], [1], low=[0])
    with pytest.raises(InvalidInputError, match="orientation: expected 'horizontal' or 'vertical', got 'diagonal'"):
        interval_chart(["a"], [1], orientation="diagonal")
    with pytest.raises(InvalidInputError, match="width: expected an integer of at least 50 pixels, got 10"):
        scatter([1], [1], width=10)
    with pytest.raises(InvalidInputError, match="series: expected at least one series"):
        line_chart([1], {})
    with pytest.raises(InvalidInputError, match=r"value_range: expected \(low, high\) with low < high"):
        interval_chart(["a"], [1], value_range=(2, 1))
    with pytest.raises(InvalidInputError, match="labels: expected 1 labels, got 2"):
        scatter([1], [1], labels=["a", "b"])


def test_pr_chart_crosses_truth_and_checks():
    import xml.etree.ElementTree as ET

    from unpooled.core.errors import InvalidInputError
    from unpooled.core.plots.svg import pr_chart

    svg = pr_chart(["a/1", "b/<2>"], [0.3, 0.6], [0.2, 0.5], [0.4, 0.7], [0.9, float("nan")], [0.8, 0.5],
                   [0.95, 0.7], truth_x=[0.35, 0.5], truth_y=[0.92, 0.6], title="P-R")
    root = ET.fromstring(svg)  # well-formed, names escaped
    ns = "{http://www.w3.org/2000/svg}"
    # the first item: two interval bars (tooltips name it) and a point; the second has no precision: not drawn
    tips = [t.text for t in root.iter(f"{ns}title")]
    assert sum(1 for t in tips if t and t.startswith("a/1: precision 0.9")) == 3
    assert not any(t and t.startswith("b/<2>: precision") for t in tips)
    assert any(t and t.startswith("a/1: truth precision 0.92") for t in tips)
    assert "b/&lt;2&gt;" in svg and "truth" in [t.text.strip() for t in root.iter(f"{ns}text") if t.text]
    with pytest.raises(InvalidInputError, match="truth_x, truth_y: expected both or neither"):
        pr_chart(["a"], [0.1], [0.0], [0.2], [0.5], [0.4], [0.6], truth_x=[0.1])
    with pytest.raises(InvalidInputError, match="y_low: expected 1 values, got 2"):
        pr_chart(["a"], [0.1], [0.0], [0.2], [0.5], [0.4, 0.1], [0.6])


def test_pr_chart_zooms_to_the_rates_and_keeps_numbers_apart():
    """UX review #7: recalls of 0.01-0.055 sat within 10 px of the axis of a fixed [0, 1] scale and the numbers "3"
    and "4" collided.  The recall axis now ends at a round tick just past the largest value, the precision axis at
    1, and no two numbers are written within 11 px of each other (in both directions)."""
    import re

    import numpy as np

    from unpooled.core.plots.svg import unit_range, pr_chart

    r = [0.055, 0.010, 0.021, 0.022, 0.030]
    p = [0.62, 0.70, 0.55, 0.56, 0.90]
    svg = pr_chart([f"s{i}" for i in range(5)], r, [x - 0.005 for x in r], [x + 0.005 for x in r],
                   p, [y - 0.05 for y in p], [y + 0.05 for y in p])
    assert unit_range([np.array(r) - 0.005, np.array(r) + 0.005]) == (0.0, 0.06)
    assert unit_range([np.array(p) - 0.05, np.array(p) + 0.05]) == (0.5, 1.0)
    assert unit_range([np.array([0.3, 0.9])]) == (0.0, 1.0)  # spread over most of [0, 1]: all of it
    assert unit_range([np.array([np.nan])]) == (0.0, 1.0)
    nums = [(float(x), float(y)) for x, y, t in re.findall(
        r'<text x="([\d.]+)" y="([\d.]+)"[^>]*font-size="10"[^>]*>(\d+)</text>', svg)]
    assert len(nums) == 5, svg[:500]
    assert all(abs(a[0] - b[0]) >= 11 or abs(a[1] - b[1]) >= 11 for i, a in enumerate(nums) for b in nums[i + 1:])
