"""The loop's plot: a results file of the demo becomes a well-formed SVG with a line per organization."""

import json
import xml.etree.ElementTree as ET
from pathlib import Path

import pytest

from benchmarks.plot_loop import main, series

SVG = "{http://www.w3.org/2000/svg}"
DOCS = Path(__file__).resolve().parents[2] / "docs"


def results(tmp_path, rounds) -> str:
    path = tmp_path / "results.json"
    path.write_text(json.dumps({"format": 1, "rounds": rounds, "ab": []}))
    return str(path)


def figures(rate):
    return {"n": 270, "edit_persisted_rate": rate, "dissatisfied_rate": 0.4, "invalid_rate": 0.01, "served_by": {"demo-base": 300}}


ROUNDS = [
    {"label": "base model", "organizations": {"acme": figures(0.04), "globex": figures(0.05)}},
    {"label": "cycle 1 (canaries live)", "organizations": {"acme": figures(0.21), "globex": figures(None)}},
    {"label": "cycle 1, more canary traffic", "organizations": {"acme": figures(0.25)}},
    {"label": "final", "organizations": {"acme": figures(0.52), "globex": figures(0.47)}},
]


def test_a_results_file_becomes_an_svg_with_a_dot_per_known_figure_and_a_legend(tmp_path):
    out = tmp_path / "plot.svg"
    main([results(tmp_path, ROUNDS), "--out", str(out)])
    root = ET.parse(out).getroot()
    assert root.tag == f"{SVG}svg"
    tooltips = [circle.find(f"{SVG}title").text for circle in root.iter(f"{SVG}circle")]
    assert tooltips == ["acme: 4.0 %", "acme: 21.0 %", "acme: 25.0 %", "acme: 52.0 %", "globex: 5.0 %", "globex: 47.0 %"]
    texts = [text.text for text in root.iter(f"{SVG}text")]
    assert {"acme", "globex", "base model", "final", "60 %"} <= set(texts) and "70 %" not in texts


def test_rounds_without_a_figure_are_crossed_by_a_dashed_line(tmp_path):
    out = tmp_path / "plot.svg"
    main([results(tmp_path, ROUNDS), "--out", str(out)])
    lines = [line for line in ET.parse(out).getroot().iter(f"{SVG}line") if line.get("stroke-width") == "2.5"]
    dashed = [line for line in lines if line.get("stroke-dasharray")]
    assert len(lines) == 3 + 1 + 2  # acme's three segments, globex's one, two legend keys
    assert len(dashed) == 1  # globex from the base round to the final one


def test_each_organization_gets_its_figure_per_round_or_none():
    labels, lines = series({"rounds": ROUNDS}, "edit_persisted_rate")
    assert labels[0] == "base model" and lines == {"acme": [0.04, 0.21, 0.25, 0.52], "globex": [0.05, None, None, 0.47]}


def test_a_file_of_another_format_is_refused(tmp_path):
    path = tmp_path / "old.json"
    path.write_text(json.dumps({"format": 0, "rounds": []}))
    with pytest.raises(SystemExit, match="format"):
        main([str(path), "--out", str(tmp_path / "plot.svg")])


def test_the_committed_picture_is_the_one_its_committed_figures_draw(tmp_path):
    out = tmp_path / "plot.svg"
    main([str(DOCS / "loop-results.json"), "--out", str(out)])
    assert out.read_text() == (DOCS / "loop-edit-persisted.svg").read_text()
