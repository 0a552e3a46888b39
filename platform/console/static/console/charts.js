// The console's plots, drawn with uPlot from the page's own endpoint (console/charts.py):
// the overview's, one chart per figure with a line per served version and a dashed mark where
// a version took over (the page also shows the same numbers as a table); and a cycle's
// training run, one chart per figure with a point per optimizer step.
const COLOURS = ["#5f6b7a", "#2459c8", "#147a4b", "#a15c00", "#8e3fb5", "#b42318", "#0f7c8c"];

// A value axis's labels with as many decimals as the ticks' spacing needs: uPlot's default
// rounds to three, so a KL of 0.0005 and 0.001 both read "0.001".
function tickLabels(u, splits) {
  const step = splits.length > 1 ? Math.abs(splits[1] - splits[0]) : 1;
  let decimals = 0;
  while (decimals < 10 && Math.abs(step * 10 ** decimals - Math.round(step * 10 ** decimals)) > 1e-6) decimals++;
  return splits.map((v) => v.toFixed(decimals));
}

function takeoverMarks(takeovers) {
  return {
    hooks: {
      draw: [(u) => {
        const ctx = u.ctx;
        ctx.save();
        ctx.setLineDash([5, 4]);
        ctx.strokeStyle = "#1d2330";
        ctx.fillStyle = "#1d2330";
        ctx.font = `${11 * devicePixelRatio}px system-ui, sans-serif`;
        for (const mark of takeovers) {
          const x = Math.round(u.valToPos(mark.at, "x", true));
          if (x < u.bbox.left || x > u.bbox.left + u.bbox.width) continue;
          ctx.beginPath();
          ctx.moveTo(x, u.bbox.top);
          ctx.lineTo(x, u.bbox.top + u.bbox.height);
          ctx.stroke();
          ctx.fillText(mark.version, x + 4, u.bbox.top + 12 * devicePixelRatio);
        }
        ctx.restore();
      }],
    },
  };
}

function draw(figure, data) {
  if (!data.times.length) {
    figure.insertAdjacentHTML("beforeend", `<p class="hint">Nothing served in the last 14 days.</p>`);
    return;
  }
  const key = figure.dataset.figure;
  const unit = data.figures[key].unit;
  const series = [{}].concat(data.versions.map((version, i) => ({
    label: version, stroke: COLOURS[i % COLOURS.length], width: 2, spanGaps: false,
    points: {show: true, size: 5}, value: (u, v) => (v == null ? "—" : `${v} ${unit.startsWith("%") ? "%" : "ms"}`),
  })));
  const values = [data.times].concat(data.versions.map((version) => data.series[version][key]));
  const width = Math.max(280, figure.clientWidth - 8);
  const chart = new uPlot({
    width, height: 220, series, plugins: [takeoverMarks(data.takeovers)],
    axes: [{}, {label: unit, size: 60, values: tickLabels}],
    scales: {
      // A period either side of the data: a single point would otherwise span years.
      x: {time: true, auto: false, range: () => [data.times[0] - data.period_seconds, data.times[data.times.length - 1] + data.period_seconds]},
      y: {range: (u, min, max) => [Math.min(0, min ?? 0), Math.max(max ?? 1, unit.startsWith("%") ? 10 : 1)]},
    },
  }, values, figure);
  figure.uplot = chart;  // for tests: the data it drew
}

function drawSteps(figure, data) {
  const key = figure.dataset.figure;
  const unit = data.figures[key].unit;
  const chart = new uPlot({
    width: Math.max(240, figure.clientWidth - 8), height: 180,
    series: [{label: "step"}, {label: data.figures[key].title, stroke: COLOURS[1], width: 2, points: {show: data.steps.length <= 60, size: 4}}],
    axes: [{label: "optimizer step", incrs: [1, 2, 5, 10, 20, 50, 100, 200, 500, 1000, 2000, 5000]}, {label: unit, size: 60, values: tickLabels}],
    scales: {
      x: {time: false},
      // A share starts at 0; a flat line of zeros is drawn low rather than in the middle of nowhere.
      y: key === "clip_fraction" ? {range: (u, min, max) => [0, Math.max(0.05, 1.2 * (max ?? 0))]} : {},
    },
  }, [data.steps, data.series[key]], figure);
  figure.uplot = chart;
}

function drawRuns(figure, data) {
  const runs = data.runs;
  if (!runs.times.length) {
    figure.insertAdjacentHTML("beforeend", `<p class="hint">No training run in the last 14 days.</p>`);
    return;
  }
  const chart = new uPlot({
    width: Math.max(280, figure.clientWidth - 8), height: 220,
    series: [{}, {label: "mean reward", stroke: COLOURS[2], width: 2, points: {show: true, size: 6},
                  value: (u, v, s, i) => (v == null ? "—" : `${v} (${runs.candidates[i] ?? "no candidate"}, ${runs.examples[i]} examples)`)}],
    axes: [{}, {label: "reward", size: 60, values: tickLabels}],
    scales: {x: {time: true, auto: false, range: () => [runs.times[0] - 600, runs.times[runs.times.length - 1] + 600]}},
  }, [runs.times, runs.mean_reward], figure);
  figure.uplot = chart;
}

const DRAW = {periods: draw, steps: drawSteps, runs: drawRuns};

async function drawAll(root) {
  for (const charts of root.querySelectorAll(".charts[data-src]:not([data-drawn])")) {
    charts.dataset.drawn = "drawing";
    const response = await fetch(charts.dataset.src, {credentials: "same-origin"});
    if (!response.ok) {
      charts.dataset.drawn = "failed";
      charts.insertAdjacentHTML("beforeend", `<p class="error">The plots' data could not be loaded (HTTP ${response.status}): reload the page.</p>`);
      continue;
    }
    const data = await response.json();
    for (const figure of charts.querySelectorAll("figure[data-figure]")) {
      DRAW[figure.dataset.draw || charts.dataset.kind || "periods"](figure, data);
    }
    charts.dataset.drawn = "true";
  }
}

document.addEventListener("DOMContentLoaded", () => drawAll(document));
// A live page (a running cycle) swaps parts of itself in: draw what arrives with them.
document.addEventListener("htmx:load", (event) => drawAll(event.detail.elt));
