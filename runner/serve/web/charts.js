// attnlab serve's page, its charts: Chart.js lines with the page's own legend (colour groups, a
// search, a pinned line), decimated past a budget of points, zoomed by dragging, updated in place
// by a live poll; and parallel coordinates for a sweep.
"use strict";

// ---- charts (Chart.js, served by attnlab itself) ----
const PALETTE = ["#1f77b4", "#d62728", "#2ca02c", "#ff7f0e", "#9467bd", "#8c564b", "#e377c2", "#7f7f7f", "#bcbd22", "#17becf"];
let charts = [];         // live Chart objects of the view, destroyed before it is redrawn
let pendingCharts = [];  // charts to create once their canvas is in the document
const yZoom = new Map(); // a chart's y range zoomed by hand, by its title: kept through the live redraws
const pins = new Map();  // a chart's legend entry clicked (pinned), by its title: its label, kept likewise
const hiddenGroups = new Map();  // a chart's colour groups hidden from its legend, by its title
const searches = new Map();      // a chart's legend search, by its title

// A label without the colour group's own word (it heads the entries): "sparsity=0.1 lr=0.001 seed 1"
// under "lr=0.001" reads "sparsity=0.1 seed 1".
function withoutGroup(label, group) {
  const own = new Set(group.split(" ")), words = label.split(" "), kept = words.filter(w => !own.has(w));
  return (kept.length ? kept : words).join(" ");
}

// Points a chart draws at most: past it, each line is drawn decimated (LTTB, Chart.js's
// decimation plugin: the points that keep its shape, at least 50 a line), so 500 runs of 1,000
// points draw and answer a hover as 500 lines of 100. A hover costs in proportion to the points
// drawn (a hit test and a draw): 100,000 took 57 ms on 2 loaded cores, above the 50 ms aimed at.
const POINT_BUDGET = 50000;
function decimation(datasets) {
  const total = datasets.reduce((n, d) => n + d.data.length, 0);
  if (total <= POINT_BUDGET) return {enabled: false};
  const samples = Math.max(50, Math.floor(POINT_BUDGET / datasets.length));
  return {enabled: true, algorithm: "lttb", samples, threshold: samples};
}

// Line i's colour: the palette's ten, then hues a golden angle apart at three lightnesses, so
// neighbours in a crowd never share one. As #rrggbb: an alpha is appended for faint lines.
function colour(i) {
  if (i < PALETTE.length) return PALETTE[i];
  const h = (i * 137.508) % 360, l = [0.42, 0.3, 0.55][Math.floor(i / PALETTE.length) % 3], sat = 0.7;
  const channel = n => {
    const k = (n + h / 30) % 12;
    const c = l - sat * Math.min(l, 1 - l) * Math.max(-1, Math.min(k - 3, 9 - k, 1));
    return Math.round(255 * c).toString(16).padStart(2, "0");
  };
  return "#" + channel(0) + channel(8) + channel(4);
}

// A log axis's labels: 1, 2 and 5 of each decade (every tick keeps its grid line); every tick where
// the range holds fewer than three of those, the decades alone where more than twelve; "0.02",
// "500", "2e+4". Chart.js's own skipping (which drops labels by spacing, 20 and 50 too) is off.
function logTicks(axis) {
  const mantissa = v => v / Math.pow(10, Math.floor(Math.log10(v) + 1e-9));
  const readable = v => (v >= 1e4 || v < 1e-3 ? v.toExponential(0) : String(+v.toPrecision(3)));
  const among = ds => axis.ticks.filter(t => ds.some(d => Math.abs(mantissa(t.value) - d) < 1e-6));
  const main = among([1, 2, 5]);
  const labelled = new Set((main.length < 3 ? axis.ticks : main.length > 12 ? among([1]) : main).map(t => t.value));
  for (const t of axis.ticks) t.label = labelled.has(t.value) ? readable(t.value) : "";
}

// The x range of the series' points, {min, max} (undefined where none): by a loop, since spreading
// half a million points into Math.min overflows the stack.
function xExtent(series) {
  let xMin = Infinity, xMax = -Infinity;
  for (const s of series)
    for (const p of s.points)
      if (Number.isFinite(p.x)) xMin = Math.min(xMin, p.x), xMax = Math.max(xMax, p.x);
  return xMin <= xMax ? {min: xMin, max: xMax} : {min: undefined, max: undefined};
}

// The Chart.js datasets of `series` (a raw line faint behind its smoothed one, a band as two
// filled edges) and the legend's entries, one per drawn line.
function datasetsOf(series) {
  const datasets = [];
  const entries = [];
  let index = 0;
  series.forEach(s => {
    const line = s.faint ? index : index++;  // a raw line shares its smoothed line's colour and entry
    const color = s.color || colour(line);
    const group = s.group;
    if (s.faint) {  // the raw line behind its smoothed one: faint, and not in the legend
      datasets.push({label: s.label + " (raw)", data: s.points, borderColor: color + "40", backgroundColor: color + "40",
                     borderWidth: 1, pointRadius: 0, fill: false, band: true, line, group, tint: color, alpha: "40"});
      return;
    }
    if (s.band) {
      datasets.push({label: s.label + " +std", data: s.band.map(p => ({x: p.x, y: p.hi})), borderWidth: 0, pointRadius: 0, band: true, fill: false, line, group});
      datasets.push({label: s.label + " −std", data: s.band.map(p => ({x: p.x, y: p.lo})), borderWidth: 0, pointRadius: 0, band: true,
                     fill: "-1", backgroundColor: color + "33", line, group});
    }
    datasets.push({label: s.label, data: s.points, borderColor: color, backgroundColor: color, borderWidth: 1.5,
                   pointRadius: s.points.length > 40 ? 0 : 2, fill: false, line, group, tint: color, alpha: ""});
    entries.push({label: s.label, color, line, group: s.group});
  });
  return {datasets, entries};
}

// Hovering: per line drawn (neither a raw line behind its smoothed one nor a band's edge), its
// point nearest the pointer in x (the points are in x order: a binary search), and of those the
// nearest. Chart.js's own "nearest" measures the pointer's distance to every point drawn, twice a
// hover (the hover and the tooltip each): 100,000 distances for 400 smoothed runs.
Chart.Interaction.modes.nearestLine = (chart, event) => {
  const at = Chart.helpers.getRelativePosition(event, chart);
  let best = null;
  for (const meta of chart.getSortedVisibleDatasetMetas()) {
    const points = meta.data;
    if (chart.data.datasets[meta.index].band || !points.length) continue;
    let lo = 0, hi = points.length - 1;
    while (lo < hi) {
      const mid = (lo + hi) >> 1;
      if (points[mid].x < at.x) lo = mid + 1;
      else hi = mid;
    }
    for (const j of [lo - 1, lo]) {
      const p = points[j];
      if (!p || p.skip || !Number.isFinite(p.y)) continue;
      const d = Math.hypot(p.x - at.x, p.y - at.y);
      if (!best || d < best.d) best = {d, element: p, datasetIndex: meta.index, index: j};
    }
  }
  return best ? [{element: best.element, datasetIndex: best.datasetIndex, index: best.index}] : [];
};

// series: [{label, points: [{x, y}], band: [{x, lo, hi}] (optional)}]; `shared`: what every line
// has, said once above; `xRange`: [min, max] zoomed to (the address's); `onZoom([min, max] | null)`;
// `xTicks`: values to mark on x instead of Chart.js's (approx's d). The legend is the page's own, under
// the chart: every label whole. Hovering a line or its legend entry brings it forward; dragging
// zooms to the box, shift-dragging pans, a double click resets.
function chart({title, xLabel, yLabel, series, xLog = false, yLog = false, shared = "", xRange = null, onZoom = null, xTicks = null}) {
  const canvas = el("canvas");
  const selection = el("div", {class: "zoom-box", hidden: ""});
  const plot = el("div", {class: "plot"}, canvas, selection);
  const {datasets, entries} = datasetsOf(series);
  const pinnedEntry = entries.find(e => e.label === pins.get(title));
  let made = null, pinned = pinnedEntry ? pinnedEntry.line : null, lit = null, xZoomed = !!xRange;
  // A line brought forward (null: every line as drawn). Only the lines' colours and widths change:
  // they are set on the drawn line elements too, and the chart drawn again without an update (which
  // would decimate and place every point anew). From a hover, Chart.js draws once after it.
  const highlight = (line, draw = true) => {
    if (!made || line === lit) return;
    lit = line;
    made.data.datasets.forEach((d, i) => {
      if (!d.tint) return;
      const on = line === null || d.line === line;
      d.borderColor = d.tint + (on ? d.alpha : "14");
      d.borderWidth = d.alpha ? 1 : line !== null && on ? 3 : 1.5;
      const drawn = made.getDatasetMeta(i).dataset;
      if (drawn && drawn.options) Object.assign(drawn.options, {borderColor: d.borderColor, borderWidth: d.borderWidth});
    });
    if (draw) made.render();
    else made.$restyled = true;
    for (const li of legend.children) li.classList.toggle("highlighted", line !== null && Number(li.dataset.line) === line);
  };
  const entryOf = e => el("li", {"data-line": e.line,
      onmouseenter: () => highlight(e.line), onmouseleave: () => highlight(pinned),
      onclick: () => {
        pinned = pinned === e.line ? null : e.line;
        pinned === null ? pins.delete(title) : pins.set(title, e.label);
        highlight(pinned);
      }}, el("span", {class: "swatch", style: "background:" + e.color}), e.group === undefined ? e.label : withoutGroup(e.label, e.group));
  // Coloured by a key: the entries under a heading per value, whose box shows or hides its lines.
  const hidden = hiddenGroups.get(title) || new Set();
  const groups = [...new Set(entries.filter(e => e.group !== undefined).map(e => e.group))];
  const legend = el("ul", {class: "legend"}, groups.length
    ? groups.flatMap(g => [el("li", {class: "group", "data-group": g},
                              el("label", {}, el("input", {type: "checkbox", checked: !hidden.has(g), onchange: event => {
                                event.target.checked ? hidden.delete(g) : hidden.add(g);
                                hiddenGroups.set(title, hidden);
                                showLines();
                              }}), el("span", {class: "swatch", style: "background:" + entries.find(e => e.group === g).color}),
                                 g + " (" + entries.filter(e => e.group === g).length + ")")),
                           ...entries.filter(e => e.group === g).map(entryOf)])
    : entries.map(entryOf));
  // A search over the legend: only the lines whose labels hold every word typed are drawn and
  // listed; a word of one or two characters matches a whole word ("seed 2" is not seed 25).
  const search = el("input", {type: "search", class: "legend-search", placeholder: "find a line", value: searches.get(title) || "",
                              oninput: () => { searches.set(title, search.value); showLines(); }});
  const found = e => {
    const text = (e.label + " " + (e.group || "")).toLowerCase(), words = text.split(" ");
    return search.value.toLowerCase().split(/\s+/).filter(w => w).every(w => (w.length > 2 ? text.includes(w) : words.includes(w)));
  };
  const lineShown = line => entries.some(e => e.line === line && found(e) && !hidden.has(e.group));
  const showLines = () => {
    for (const li of legend.querySelectorAll("li[data-line]")) {
      const e = entries.find(x => x.line === Number(li.dataset.line));
      li.hidden = !found(e);
      li.classList.toggle("off", hidden.has(e.group));
    }
    if (!made) return;
    made.data.datasets.forEach((d, i) => made.setDatasetVisibility(i, lineShown(d.line)));
    made.update("none");
  };
  const box = el("div", {class: "chart", "data-title": title}, shared ? el("p", {class: "shared"}, shared) : null, plot,
                 entries.length > 12 ? search : null, legend);
  let base = xExtent(series);
  const x = xRange ? {min: xRange[0], max: xRange[1]} : base;
  const y = yZoom.get(title) || {};
  pendingCharts.push(() => {
    made = new Chart(canvas, {
      type: "line",
      data: {datasets},
      // a hover that restyled the lines has Chart.js draw the chart after the event (once)
      plugins: [{id: "restyled", afterEvent: (c, args) => { if (c.$restyled) c.$restyled = false, args.changed = true; }}],
      options: {
        animation: false, maintainAspectRatio: false, parsing: false, spanGaps: false,
        interaction: {mode: "nearestLine", intersect: false},
        onHover: (event, elements) => highlight(elements.length ? datasets[elements[0].datasetIndex].line : pinned, false),
        scales: {x: {type: xLog ? "logarithmic" : "linear", min: x.min, max: x.max, title: {display: true, text: xLabel},
                     afterBuildTicks: xTicks ? axis => { axis.ticks = xTicks.map(value => ({value})); } : undefined,
                     afterTickToLabelConversion: xTicks ? axis => axis.ticks.forEach(t => { t.label = fmt(t.value); })
                                                        : xLog ? logTicks : undefined,
                     ticks: {autoSkip: !xLog && !xTicks}},
                 y: {type: yLog ? "logarithmic" : "linear", min: y.min, max: y.max, title: {display: true, text: yLabel},
                     afterTickToLabelConversion: yLog ? logTicks : undefined, ticks: {autoSkip: !yLog}}},
        plugins: {title: {display: !!title, text: title}, legend: {display: false}, decimation: decimation(datasets),
                  tooltip: {filter: item => !datasets[item.datasetIndex].band}},
      },
    });
    charts.push(made);
    // what the axes say, for a reader without the canvas (and the tests)
    const sayTicks = () => {
      const said = axis => made.scales[axis].ticks.map(t => t.label).filter(l => l !== "" && l !== undefined).join(" ");
      box.dataset.xTicks = said("x");
      box.dataset.yTicks = said("y");
    };
    sayTicks();
    if (search.value || hidden.size) showLines();
    if (pinned !== null) lit = undefined, highlight(pinned);
    // A live poll's new points, drawn into this chart in place when its lines are the same ones
    // (labels, raw lines, bands): no new chart, the zoom, the pinned line and the hover kept.
    // false when they are not (the caller draws the chart anew).
    box.setSeries = next => {
      const now = datasetsOf(next);
      const fits = now.datasets.length === datasets.length &&
                   now.datasets.every((d, i) => d.label === datasets[i].label && d.line === datasets[i].line);
      if (!fits) return false;
      now.datasets.forEach((d, i) => Object.assign(datasets[i], {data: d.data, pointRadius: d.pointRadius}));
      base = xExtent(next);
      if (!xZoomed) Object.assign(made.options.scales.x, base);
      made.options.plugins.decimation = decimation(now.datasets);
      made.update("none");
      sayTicks();
      return true;
    };
    zoomByDragging(made, plot, selection, {
      zoomed: (xs, ys) => {
        if (ys) yZoom.set(title, {min: ys[0], max: ys[1]});
        if (xs) xZoomed = true;
        if (onZoom && xs) onZoom(xs);
        sayTicks();
      },
      reset: () => {
        xZoomed = false;
        yZoom.delete(title);
        Object.assign(made.options.scales.x, base);
        Object.assign(made.options.scales.y, {min: undefined, max: undefined});
        made.update("none");
        if (onZoom) onZoom(null);
        sayTicks();
      },
    });
  });
  return box;
}

// Drag to zoom to the box drawn (a flat drag: x only), shift-drag to pan, double click to reset.
function zoomByDragging(made, plot, selection, {zoomed, reset}) {
  let start = null;
  const at = event => {
    const r = plot.getBoundingClientRect();
    return {x: event.clientX - r.left, y: event.clientY - r.top, shift: event.shiftKey};
  };
  const range = (axis, a, b) => {
    const [lo, hi] = [axis.getValueForPixel(a), axis.getValueForPixel(b)];
    return lo < hi ? [lo, hi] : [hi, lo];
  };
  plot.addEventListener("mousedown", event => {
    if (event.button === 0) start = at(event), event.preventDefault();
  });
  plot.addEventListener("mousemove", event => {
    if (!start || start.shift) return;
    const now = at(event);
    Object.assign(selection.style, {left: Math.min(start.x, now.x) + "px", top: Math.min(start.y, now.y) + "px",
                                    width: Math.abs(now.x - start.x) + "px", height: Math.abs(now.y - start.y) + "px"});
    selection.hidden = false;
  });
  window.addEventListener("mouseup", event => {
    if (!start) return;
    const from = start, to = at(event);
    start = null, selection.hidden = true;
    const {x, y} = made.scales;
    let xs = null, ys = null;
    if (from.shift) {  // pan: the ranges move by the drag
      xs = range(x, x.left - (to.x - from.x), x.right - (to.x - from.x));
      ys = range(y, y.bottom - (to.y - from.y), y.top - (to.y - from.y));
    } else {
      if (Math.abs(to.x - from.x) > 4) xs = range(x, from.x, to.x);
      if (Math.abs(to.y - from.y) > 4 && xs) ys = range(y, from.y, to.y);
    }
    if (!xs && !ys) return;
    if (xs) Object.assign(made.options.scales.x, {min: xs[0], max: xs[1]});
    if (ys) Object.assign(made.options.scales.y, {min: ys[0], max: ys[1]});
    made.update("none");
    zoomed(xs, ys);
  });
  plot.addEventListener("dblclick", reset);
}

// Line i's colour, or coloured by a key: the hue of its group's value, lighter or darker by its
// place among the group's lines.
function groupColours(base) {
  const values = [...new Set(base.map(s => s.group))], seen = new Map();
  return base.map(s => {
    const k = seen.get(s.group) || 0;
    seen.set(s.group, k + 1);
    return shade(colour(values.indexOf(s.group)), k);
  });
}

// #rrggbb mixed toward white or black by a step of 12% per k (k = 0: the colour itself)
function shade(hex, k) {
  const t = (k % 2 ? 1 : -1) * Math.min(0.6, 0.12 * Math.ceil(k / 2)), target = t > 0 ? 255 : 0;
  return "#" + [1, 3, 5].map(i => Math.round(parseInt(hex.slice(i, i + 2), 16) + (target - parseInt(hex.slice(i, i + 2), 16)) * Math.abs(t))
                               .toString(16).padStart(2, "0")).join("");
}

// Every configuration across its swept keys and the result, one line each (parallel coordinates),
// coloured from blue (the lowest result) to red (the highest). A numeric key's axis is linear, or
// logarithmic where its values are positive and span 20 times or more; another key's values are
// evenly spaced in their order.
function parallelCoordinates(rows, keys, metric) {
  const canvas = el("canvas", {width: 640, height: 380, class: "parallel"});
  const axes = [...keys, metric + "_mean"].map(k => {
    const values = rows.map(r => r[k]);
    const numeric = values.every(v => Number.isFinite(Number(v)));
    const distinct = [...new Set(values)].sort((a, b) => (numeric ? Number(a) - Number(b) : String(a).localeCompare(String(b))));
    const log = numeric && distinct.every(v => Number(v) > 0) && Number(distinct[distinct.length - 1]) / Number(distinct[0]) >= 20;
    const f = v => (log ? Math.log(Number(v)) : Number(v));
    const [lo, hi] = numeric ? [f(distinct[0]), f(distinct[distinct.length - 1])] : [0, distinct.length - 1];
    const place = v => (hi > lo ? ((numeric ? f(v) : distinct.indexOf(v)) - lo) / (hi - lo) : 0.5);
    return {key: k === metric + "_mean" ? metric : k.split(".").pop(), place, ticks: numeric && distinct.length > 6 ? [distinct[0], distinct[distinct.length - 1]] : distinct};
  });
  const box = el("div", {class: "chart", "data-axes": axes.map(a => a.key).join(" ")}, el("p", {class: "shared"}, "every configuration across the swept keys"), canvas);
  pendingCharts.push(() => {
    const g = canvas.getContext("2d"), W = canvas.width, H = canvas.height, top = 30, bottom = H - 30, left = 50, right = W - 50;
    const xAt = i => left + (right - left) * i / Math.max(1, axes.length - 1), yAt = (a, v) => bottom - (bottom - top) * a.place(v);
    const result = axes[axes.length - 1], lows = rows.map(r => result.place(r[metric + "_mean"]));
    rows.forEach((r, n) => {
      const t = lows[n];
      g.strokeStyle = `rgba(${Math.round(40 + 200 * t)}, 60, ${Math.round(220 - 190 * t)}, 0.7)`;
      g.lineWidth = 1.2;
      g.beginPath();
      [...keys, metric + "_mean"].forEach((k, i) => (i ? g.lineTo : g.moveTo).call(g, xAt(i), yAt(axes[i], r[k])));
      g.stroke();
    });
    g.fillStyle = "#222", g.strokeStyle = "#888", g.lineWidth = 1, g.font = "12px system-ui, sans-serif", g.textAlign = "center";
    axes.forEach((a, i) => {
      g.beginPath(), g.moveTo(xAt(i), top), g.lineTo(xAt(i), bottom), g.stroke();
      g.fillText(a.key, xAt(i), top - 12);
      for (const v of a.ticks) g.fillText(typeof v === "number" ? fmt(v) : String(v), xAt(i), yAt(a, v) + 4);
    });
  });
  return box;
}
