"""The loop's edit-persisted rate per round, one line per organization, drawn as an SVG.

    .venv/bin/python benchmarks/plot_loop.py RESULTS.json [--out docs/loop-edit-persisted.svg]
        [--metric edit_persisted_rate | edit_persisted_on_clear_rate | dissatisfied_rate | invalid_rate]

Reads the results file the demo writes (`scripts/demo --results PATH`, or `results.json` in
the run's data directory): its rounds in order, each with per-organization figures. A round
an organization was not in (the extra canary rounds take only those still in canary) or whose
figure was not recorded (null) leaves a gap: the line crosses it dashed. The SVG is written
by hand, so plotting needs nothing beyond the standard library.
"""

import argparse
import json
import math
from collections.abc import Sequence
from pathlib import Path
from xml.sax.saxutils import escape

FORMAT = 1  # the demo's RESULTS_FORMAT this script reads
METRICS = {
    "edit_persisted_rate": "edit persisted",
    "edit_persisted_on_clear_rate": "edit persisted on clear prompts",
    "dissatisfied_rate": "dissatisfied follow-up",
    "invalid_rate": "invalid tool call",
}
COLOURS = ("#1f77b4", "#d62728", "#2ca02c", "#9467bd", "#ff7f0e", "#8c564b")
WIDTH, HEIGHT = 760, 420
LEFT, RIGHT, TOP, BOTTOM = 110, 190, 48, 110  # margins around the plot area: the legend sits right


def main(argv: Sequence[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("results", type=Path, help="a results file of the demo")
    parser.add_argument("--out", type=Path, default=Path("docs/loop-edit-persisted.svg"))
    parser.add_argument("--metric", choices=sorted(METRICS), default="edit_persisted_rate")
    args = parser.parse_args(argv)
    document = load(args.results)
    labels, lines = series(document, args.metric)
    title = document.get("title") or f"{METRICS[args.metric].capitalize()} rate per round"
    args.out.write_text(svg(labels, lines, title=title, metric=METRICS[args.metric]))
    print(f"wrote {args.out}")


def load(path: Path) -> dict:
    document = json.loads(path.read_text())
    if document.get("format") != FORMAT:
        raise SystemExit(f"{path}: format {document.get('format')!r}, this script reads format {FORMAT}.")
    return document


def series(document: dict, metric: str) -> tuple[list[str], dict[str, list[float | None]]]:
    """The round labels, and each organization's figure per round (None where it has none)."""
    rounds = document["rounds"]
    names = list(dict.fromkeys(name for r in rounds for name in r["organizations"]))
    lines = {name: [(r["organizations"].get(name) or {}).get(metric) for r in rounds] for name in names}
    return [r["label"] for r in rounds], lines


def svg(labels: Sequence[str], lines: dict[str, list[float | None]], *, title: str, metric: str) -> str:
    """A line chart: x the rounds in order, y the rate in per cent, a legend on the right."""
    known = [value for values in lines.values() for value in values if value is not None]
    top = max(10, math.ceil(max(known, default=0) * 10) * 10)  # per cent, a multiple of 10
    plot_w, plot_h = WIDTH - LEFT - RIGHT, HEIGHT - TOP - BOTTOM

    def x(i: int) -> float:
        return LEFT + (plot_w * i / (len(labels) - 1) if len(labels) > 1 else plot_w / 2)

    def y(rate: float) -> float:
        return TOP + plot_h * (1 - rate * 100 / top)

    parts = [
        f'<svg xmlns="http://www.w3.org/2000/svg" width="{WIDTH}" height="{HEIGHT}" viewBox="0 0 {WIDTH} {HEIGHT}" '
        'font-family="sans-serif" font-size="12">',
        f'<rect width="{WIDTH}" height="{HEIGHT}" fill="white"/>',
        f'<text x="{LEFT}" y="{TOP - 20}" font-size="15">{escape(title)}</text>',
    ]
    for tick in range(0, top + 1, 10):  # horizontal grid and the y axis's labels
        parts.append(f'<line x1="{LEFT}" y1="{y(tick / 100):.1f}" x2="{LEFT + plot_w}" y2="{y(tick / 100):.1f}" stroke="#ddd"/>')
        parts.append(f'<text x="{LEFT - 8}" y="{y(tick / 100) + 4:.1f}" text-anchor="end">{tick} %</text>')
    parts.append(f'<text transform="translate(16 {TOP + plot_h / 2:.1f}) rotate(-90)" text-anchor="middle">'
                 f'{escape(metric)}, per request</text>')
    for i, label in enumerate(labels):  # the rounds, slanted so that long labels do not collide
        parts.append(f'<text transform="translate({x(i):.1f} {TOP + plot_h + 16}) rotate(-25)" text-anchor="end">{escape(label)}</text>')
    for k, (name, values) in enumerate(lines.items()):
        colour = COLOURS[k % len(COLOURS)]
        parts += _line(values, x, y, colour, name)
        legend_y = TOP + 18 * k
        parts.append(f'<line x1="{WIDTH - RIGHT + 20}" y1="{legend_y}" x2="{WIDTH - RIGHT + 44}" y2="{legend_y}" '
                     f'stroke="{colour}" stroke-width="2.5"/>')
        parts.append(f'<text x="{WIDTH - RIGHT + 50}" y="{legend_y + 4}">{escape(name)}</text>')
    parts.append("</svg>")
    return "\n".join(parts) + "\n"


def _line(values: Sequence[float | None], x, y, colour: str, name: str) -> list[str]:
    """Segments between consecutive known points (dashed where rounds between them have no
    figure), and a dot with a tooltip at each known point."""
    points = [(i, value) for i, value in enumerate(values) if value is not None]
    parts = []
    for (i, a), (j, b) in zip(points, points[1:]):
        dash = ' stroke-dasharray="6 4"' if j - i > 1 else ""
        parts.append(f'<line x1="{x(i):.1f}" y1="{y(a):.1f}" x2="{x(j):.1f}" y2="{y(b):.1f}" stroke="{colour}" stroke-width="2.5"{dash}/>')
    for i, value in points:
        parts.append(f'<circle cx="{x(i):.1f}" cy="{y(value):.1f}" r="4" fill="{colour}">'
                     f'<title>{escape(name)}: {value * 100:.1f} %</title></circle>')
    return parts


if __name__ == "__main__":
    main()
