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
