// attnlab serve's page: one view per route (#/, #/tables, #/runs, #/run/N, #/curves, #/compare,
// #/bench, #/approx), each drawn from the JSON endpoints (runner/serve/README.md). Every value is
// written as text (textContent, text nodes; never innerHTML), so a name holding markup shows as
// that text. Live views poll every 2 s and redraw only when an answer changed; a view's filters
// live in the address (#/runs?where=...), so a reload or a shared link shows the same thing.
"use strict";

const POLL_MS = 2000;
const ENDED_BADLY = ["failed", "diverged", "oom", "lost", "interrupted"];

// ---- small DOM helpers: strings always become text nodes ----
function el(tag, attrs = {}, ...children) {
  const e = document.createElement(tag);
  for (const [k, v] of Object.entries(attrs)) {
    if (v === undefined || v === null || v === false) continue;
    if (k.startsWith("on")) e.addEventListener(k.slice(2), v);
    else if (k === "value") e.value = v;
    else if (k === "checked") e.checked = true;
    else e.setAttribute(k, v);
  }
  for (const c of children.flat()) if (c !== undefined && c !== null) e.append(c instanceof Node ? c : String(c));
  return e;
}

function fmt(value) {
  if (value === null || value === undefined) return "-";
  if (typeof value !== "number") return String(value);
  if (Number.isInteger(value)) return String(value);
  return Math.abs(value) >= 1e4 || (value !== 0 && Math.abs(value) < 1e-3) ? value.toExponential(3) : String(+value.toPrecision(4));
}

function duration(seconds) {
  if (seconds === null || seconds === undefined) return "-";
  const s = Math.round(seconds);
  if (s < 60) return s + "s";
  if (s < 3600) return Math.floor(s / 60) + "m" + String(s % 60).padStart(2, "0") + "s";
  return Math.floor(s / 3600) + "h" + String(Math.floor(s / 60) % 60).padStart(2, "0") + "m";
}

// "12s ago" for a stored UTC time (2026-11-26T09:16:38.044Z), the text itself if it does not parse
function ago(iso) {
  const t = Date.parse(iso);
  return Number.isNaN(t) ? (iso || "-") : duration(Math.max(0, (Date.now() - t) / 1000)) + " ago";
}

function bytes(n) {
  if (n === null || n === undefined) return "-";
  const units = ["B", "KiB", "MiB", "GiB", "TiB"];
  let i = 0;
  while (n >= 1024 && i < units.length - 1) n /= 1024, ++i;
  return n.toFixed(i ? 1 : 0) + " " + units[i];
}

// A time in the unit that reads best: "850 ms", "12.3 s", "4m05s"
function seconds(value) {
  if (value === null || value === undefined) return "-";
  if (Math.abs(value) < 1) return +(value * 1000).toPrecision(3) + " ms";
  if (Math.abs(value) < 60) return +value.toPrecision(3) + " s";
  return duration(value);
}

// A cell in the unit its column names (peak_memory_bytes_mean in MiB, train_seconds in s), never
// raw bytes; counts (_n) stay counts. Sorting still reads the number.
function cellText(column, value) {
  if (typeof value === "number" && typeof column === "string" && !/_n$/.test(column)) {
    if (/bytes/.test(column)) return bytes(value);
    if (/seconds/.test(column)) return seconds(value);
  }
  return fmt(value);
}

// "0.3612", "-0.02", "0.3500 ± 0.0100 (3)†", "1.8 GiB": right-aligned like numbers
const NUMBER_TEXT = /^[-+]?[0-9][0-9.,e+-]*( ± [0-9.e+-]+)?( \([0-9]+\))?( [KMGT]?i?B)?[†‡]*$/;

// A table of `rows` (arrays of cell values: a Node, or a value shown with fmt); clicking a header
// sorts by that column (numbers as numbers, missing values last). A table with an id keeps its
// sort in the address (sort_ID=column, or -column descending): the live redraws and a reload keep it.
function table(header, rows, {id, sortable = true} = {}) {
  const t = el("table", {id});
  const head = t.createTHead().insertRow();
  const body = t.createTBody();
  let order = {column: -1, ascending: true};
  const sortBy = (column, ascending) => {
    order = {column, ascending};
    const key = v => (v instanceof Node ? (v.dataset && v.dataset.sort !== undefined ? v.dataset.sort : v.textContent) : v);
    rows.sort((a, b) => {
      const x = key(a[column]), y = key(b[column]);
      if (x === null || x === undefined) return 1;
      if (y === null || y === undefined) return -1;
      const c = typeof x === "number" && typeof y === "number" ? x - y : String(x).localeCompare(String(y), undefined, {numeric: true});
      return ascending ? c : -c;
    });
  };
  const draw = () => {
    body.replaceChildren();
    if (!rows.length) body.insertRow().appendChild(el("td", {colspan: header.length || 1, class: "note"}, "none"));
    for (const row of rows) {
      const tr = body.insertRow();
      for (const [column, value] of row.entries()) {
        const td = tr.insertCell();
        if (value instanceof Node) td.append(value);
        else td.textContent = cellText(header[column], value);
        if (typeof value === "string" && value.length > 60) td.className = "wrap";  // an error, a path
        if (typeof value === "number" || (typeof value === "string" && NUMBER_TEXT.test(value))) td.className = "number";
      }
    }
  };
  const kept = id && sortable && current ? current.params.get("sort_" + id) : null;
  header.forEach((name, column) => {
    const th = el("th", {class: sortable ? "sortable" : null}, name);
    if (sortable) th.addEventListener("click", () => {
      sortBy(column, order.column === column ? !order.ascending : true);
      if (id) setAddress({["sort_" + id]: (order.ascending ? "" : "-") + name});
      draw();
    });
    head.appendChild(th);
    if (kept && kept.replace(/^-/, "") === name) sortBy(column, !kept.startsWith("-"));
  });
  draw();
  return t;
}

// A job's attempts with the same status and error, once each: [{runs: [ids], status, error}], in order
function sameErrors(attempts) {
  const out = [];
  for (const a of attempts) {
    const last = out[out.length - 1];
    if (last && last.status === a.status && last.error === a.error) last.runs.push(a.run);
    else out.push({runs: [a.run], status: a.status, error: a.error});
  }
  return out;
}

// "datasets.listops.max_depth" -> "max_depth" as a column's name, the whole key where two would
// read the same
function shortKeys(keys) {
  const last = keys.map(k => k.split(".").pop());
  return keys.map((k, i) => (last.indexOf(last[i]) !== last.lastIndexOf(last[i]) ? k : last[i]));
}

// The results a runs table leads with; the others wait in its column chooser.
const HEADLINE_RESULTS = ["test_acc", "best_val_acc", "wall_seconds", "peak_memory_bytes"];

// A stored UTC time in the browser's zone, as the header's clock; sorted by the instant.
function localTime(iso) {
  // SQLite's times are UTC, some written without a zone ("2026-11-26 09:16:38"): never read as local
  const t = Date.parse(/^\d{4}-\d\d-\d\d[ T][0-9:.]+$/.test(iso || "") ? iso.replace(" ", "T") + "Z" : iso);
  return Number.isNaN(t) ? (iso || "-") : el("time", {datetime: iso, "data-sort": iso}, new Date(t).toLocaleString());
}

const link = (href, text) => el("a", {href}, text);
const runLink = id => link("#/run/" + id, "run " + id);
const notes = lines => (lines || []).map(n => el("p", {class: "note"}, n));

// ---- charts (Chart.js, served by attnlab itself) ----
const PALETTE = ["#1f77b4", "#d62728", "#2ca02c", "#ff7f0e", "#9467bd", "#8c564b", "#e377c2", "#7f7f7f", "#bcbd22", "#17becf"];
let charts = [];         // live Chart objects of the view, destroyed before it is redrawn
let pendingCharts = [];  // charts to create once their canvas is in the document
const yZoom = new Map(); // a chart's y range zoomed by hand, by its title: kept through the live redraws

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

// series: [{label, points: [{x, y}], band: [{x, lo, hi}] (optional)}]; `shared`: what every line
// has, said once above; `xRange`: [min, max] zoomed to (the address's); `onZoom([min, max] | null)`;
// `xTicks`: values to mark on x instead of Chart.js's (approx's d). The legend is the page's own, under
// the chart: every label whole. Hovering a line or its legend entry brings it forward; dragging
// zooms to the box, shift-dragging pans, a double click resets.
function chart({title, xLabel, yLabel, series, xLog = false, yLog = false, shared = "", xRange = null, onZoom = null, xTicks = null}) {
  const canvas = el("canvas");
  const selection = el("div", {class: "zoom-box", hidden: ""});
  const plot = el("div", {class: "plot"}, canvas, selection);
  // the x range by a loop: spreading half a million points into Math.min overflows the stack
  let xMin = Infinity, xMax = -Infinity;
  for (const s of series)
    for (const p of s.points)
      if (Number.isFinite(p.x)) xMin = Math.min(xMin, p.x), xMax = Math.max(xMax, p.x);
  const xKnown = xMin <= xMax;
  const datasets = [];
  const entries = [];  // the legend: one per drawn line
  let index = 0;
  series.forEach(s => {
    const line = s.faint ? index : index++;  // a raw line shares its smoothed line's colour and entry
    const color = s.color || colour(line);
    if (s.faint) {  // the raw line behind its smoothed one: faint, and not in the legend
      datasets.push({label: s.label + " (raw)", data: s.points, borderColor: color + "40", backgroundColor: color + "40",
                     borderWidth: 1, pointRadius: 0, fill: false, band: true, line, tint: color, alpha: "40"});
      return;
    }
    if (s.band) {
      datasets.push({label: s.label + " +std", data: s.band.map(p => ({x: p.x, y: p.hi})), borderWidth: 0, pointRadius: 0, band: true, fill: false, line});
      datasets.push({label: s.label + " −std", data: s.band.map(p => ({x: p.x, y: p.lo})), borderWidth: 0, pointRadius: 0, band: true,
                     fill: "-1", backgroundColor: color + "33", line});
    }
    datasets.push({label: s.label, data: s.points, borderColor: color, backgroundColor: color, borderWidth: 1.5,
                   pointRadius: s.points.length > 40 ? 0 : 2, fill: false, line, tint: color, alpha: ""});
    entries.push({label: s.label, color, line});
  });
  let made = null, pinned = null, lit = null;
  const highlight = line => {  // null: every line as drawn
    if (!made || line === lit) return;
    lit = line;
    for (const d of made.data.datasets) {
      if (!d.tint) continue;
      const on = line === null || d.line === line;
      d.borderColor = d.tint + (on ? d.alpha : "14");
      d.borderWidth = d.alpha ? 1 : line !== null && on ? 3 : 1.5;
    }
    made.update("none");
    for (const li of legend.children) li.classList.toggle("highlighted", line !== null && Number(li.dataset.line) === line);
  };
  const legend = el("ul", {class: "legend"}, entries.map(e => el("li", {"data-line": e.line,
      onmouseenter: () => highlight(e.line), onmouseleave: () => highlight(pinned),
      onclick: () => highlight(pinned = pinned === e.line ? null : e.line)}, el("span", {class: "swatch", style: "background:" + e.color}), e.label)));
  const box = el("div", {class: "chart"}, shared ? el("p", {class: "shared"}, shared) : null, plot, legend);
  const base = {min: xKnown ? xMin : undefined, max: xKnown ? xMax : undefined};
  const x = xRange ? {min: xRange[0], max: xRange[1]} : base;
  const y = yZoom.get(title) || {};
  pendingCharts.push(() => {
    made = new Chart(canvas, {
      type: "line",
      data: {datasets},
      options: {
        animation: false, maintainAspectRatio: false, parsing: false, spanGaps: false,
        interaction: {mode: "nearest", intersect: false},
        onHover: (event, elements) => highlight(elements.length ? datasets[elements[0].datasetIndex].line : pinned),
        scales: {x: {type: xLog ? "logarithmic" : "linear", min: x.min, max: x.max, title: {display: true, text: xLabel},
                     afterBuildTicks: xTicks ? axis => { axis.ticks = xTicks.map(value => ({value})); } : undefined,
                     afterTickToLabelConversion: xTicks ? axis => axis.ticks.forEach(t => { t.label = fmt(t.value); })
                                                        : xLog ? logTicks : undefined,
                     ticks: {autoSkip: !xLog && !xTicks}},
                 y: {type: yLog ? "logarithmic" : "linear", min: y.min, max: y.max, title: {display: true, text: yLabel},
                     afterTickToLabelConversion: yLog ? logTicks : undefined, ticks: {autoSkip: !yLog}}},
        plugins: {title: {display: !!title, text: title}, legend: {display: false},
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
    zoomByDragging(made, plot, selection, {
      zoomed: (xs, ys) => {
        if (ys) yZoom.set(title, {min: ys[0], max: ys[1]});
        if (onZoom && xs) onZoom(xs);
        sayTicks();
      },
      reset: () => {
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

// ---- the views: controls (drawn once per address) and content (redrawn when its data changed) ----
async function get(url) {
  const response = await fetch(url, {cache: "no-store"});
  const text = await response.text();
  let body;
  try {
    body = JSON.parse(text);
  } catch (e) {
    throw new Error(url + ": not JSON (" + response.status + ")");
  }
  if (!response.ok) throw Object.assign(new Error(body.error || response.statusText), {status: response.status});
  return {body, text};
}

// /api/curves and /api/runs polled for what changed only: the page names the runs it holds (held=...:
// an ended run whole, a running one's curve up to its last step) and the server sends only what
// it lacks; the answer is merged here into the whole. A mean needs every point: fetched whole.
const heldAnswers = new Map();  // url -> {body: the merged answer, version: bumped when it changed}

// "3-7,9,12": ids as ranges where they run on
function idRanges(ids) {
  const sorted = ids.slice().sort((a, b) => a - b), words = [];
  for (let i = 0; i < sorted.length; ++i) {
    let j = i;
    while (j + 1 < sorted.length && sorted[j + 1] === sorted[j] + 1) ++j;
    words.push(j > i ? sorted[i] + "-" + sorted[j] : String(sorted[i])), i = j;
  }
  return words;
}

// The merged answer of `url`: the first time whole; then `held(last)` names what the page has,
// and `merge(last, part)` gives {body, changed}.
async function getHeld(url, held, merge) {
  const last = heldAnswers.get(url);
  if (!last) {
    const whole = await get(url);
    heldAnswers.set(url, {body: whole.body, version: 0});
    return {body: whole.body, text: url + "#0"};
  }
  const part = (await get(url + (url.includes("?") ? "&" : "?") + "held=" + held(last.body))).body;
  const {body, changed} = merge(last.body, part);
  if (changed) heldAnswers.set(url, {body, version: last.version + 1});
  const now = heldAnswers.get(url);
  return {body: now.body, text: url + "#" + now.version};
}

const same = (a, b) => JSON.stringify(a) === JSON.stringify(b);

function getCurves(url) {
  if (/[?&]mean=1/.test(url)) return get(url);
  const held = curves => idRanges(curves.runs.filter(r => r.status !== "running").map(r => r.run))
    .concat(curves.runs.filter(r => r.status === "running").map(r => r.run + ":" + (r.points.length ? r.points[r.points.length - 1][0] : -1)))
    .join(",");
  return getHeld(url, held, (last, part) => {
    const before = new Map(last.runs.map(r => [r.run, r]));
    let changed = part.runs.length !== last.runs.length ||
                  !same([part.shared, part.left_out, part.jobs_without_run], [last.shared, last.left_out, last.jobs_without_run]);
    const runs = part.runs.map(({unchanged, after_step, ...r}) => {
      const had = before.get(r.run);
      if (!had || unchanged === undefined && after_step === undefined) return changed = true, r;
      if (r.points.length || r.status !== had.status || r.short_label !== had.short_label) changed = true;
      return {...r, points: unchanged ? had.points : had.points.concat(r.points)};
    });
    return {body: {...part, runs}, changed};
  });
}

function getRuns(url) {
  const held = runs => idRanges(runs.filter(r => r.status !== "running").map(r => r.run)).join(",");
  return getHeld(url, held, (last, part) => {
    const before = new Map(last.map(r => [r.run, r]));
    let changed = part.length !== last.length;
    const runs = part.map(({unchanged, ...r}) => {
      const had = before.get(r.run);
      const row = unchanged && had ? {...had, params: r.params} : r;
      if (!had || !same(row, had)) changed = true;
      return row;
    });
    return {body: runs, changed};
  });
}

function query(params, names) {
  const q = new URLSearchParams();
  for (const name of names) for (const v of params.getAll(name)) if (v !== "") q.append(name, v);
  const s = q.toString();
  return s ? "?" + s : "";
}

// The curves a view draws side by side: metric=loss,acc (default: loss)
const metricsOf = params => (params.get("metric") || "loss").split(",").map(m => m.trim()).filter(m => m);

// `params` with `name` set to `value`
function withValue(params, name, value) {
  const out = new URLSearchParams(params);
  out.set(name, value);
  return out;
}

// TensorBoard's smoothing: an exponential moving average with weight `w`, debiased for its start
// (the first points are not pulled toward 0); a NaN stays a NaN and does not poison what follows.
function ema(points, w) {
  let last = 0, n = 0;
  return points.map(p => {
    if (!Number.isFinite(p.y)) return {x: p.x, y: p.y};
    last = last * w + (1 - w) * p.y;
    ++n;
    return {x: p.x, y: last / (1 - Math.pow(w, n))};
  });
}

// One answer of /api/curves as chart series: each run (or mean over seeds, with its band) labelled
// by what tells it from the others; smoothed, the raw line stays faint behind.
function curveSeries(curves, x, smooth) {
  const base = curves.means.length
    ? curves.means.map(m => ({label: m.short_label || m.label, run: m.runs.join(" "), points: m.points.map(p => ({x: p[x], y: p[2]})),
                              band: m.runs.length > 1 ? m.points.map(p => ({x: p[x], lo: p[2] - p[3], hi: p[2] + p[3]})) : null}))
    : curves.runs.map(r => ({label: r.short_label || r.label, run: String(r.run), points: r.points.map(p => ({x: p[x], y: p[2]}))}));
  if (!(smooth > 0)) return base;
  return base.flatMap((s, i) => {
    const color = colour(i);
    return [{...s, color, faint: true}, {...s, color, points: ema(s.points, smooth), band: null, smoothed: smooth}];
  });
}

// A link that saves `make()`'s text as a file, made when clicked (what is shown at that moment)
function downloadLink(text, name, type, make) {
  return el("a", {href: "#", download: name, onclick: event => {
    event.currentTarget.href = URL.createObjectURL(new Blob([make()], {type}));
  }}, text);
}

function curvesCsv(shown) {
  const quote = v => (/[",\n]/.test(String(v)) ? '"' + String(v).replace(/"/g, '""') + '"' : String(v));
  const lines = ["split,metric,series,runs,smoothed,x,y"];
  for (const {curves, series} of shown)
    for (const s of series)
      for (const p of s.points)
        lines.push([curves.split, curves.metric, s.label, s.run, s.faint ? "raw" : s.smoothed ? s.smoothed : "", p.x, p.y].map(quote).join(","));
  return lines.join("\n") + "\n";
}

// `params` with `name` set to `value` when the address does not set it
function withDefault(params, name, value) {
  const out = new URLSearchParams(params);
  if (!out.has(name)) out.set(name, value);
  return out;
}

// Changes the address's parameters in place (a sort, a zoom): no new view, no history entry; the
// live redraws and a reload read them back. `changes`: {name: value, or null to remove}.
function setAddress(changes) {
  const params = new URLSearchParams(current.params);
  for (const [name, value] of Object.entries(changes)) value === null ? params.delete(name) : params.set(name, value);
  const {name, id} = route();
  const q = params.toString();
  history.replaceState(null, "", "#/" + name + (id ? "/" + id : "") + (q ? "?" + q : ""));
  current.params = params;
}

// The experiments as a picker that writes the address (#/?experiment=NAME; "*": all of them), the
// one shown by default the latest, with its description and its jobs per state.
function experimentPicker(experiments, params) {
  if (!experiments.length) return null;
  const chosen = params.get("experiment") || experiments[experiments.length - 1].name;
  const select = el("select", {id: "experiment", onchange: () => {
    const q = new URLSearchParams(params);
    q.set("experiment", select.value);
    location.hash = "#/?" + q;
  }}, el("option", {value: "*", selected: chosen === "*" ? "" : null}, "(every experiment)"),
      experiments.slice().reverse().map(e => el("option", {value: e.name, selected: e.name === chosen ? "" : null},
                                                 `${e.name} (${e.jobs} job${e.jobs === 1 ? "" : "s"})`)));
  const shown = experiments.find(e => e.name === chosen);
  const states = shown ? Object.entries(shown.states).map(([state, n]) => `${n} ${state}`).join(", ") : "";
  return el("div", {class: "experiment"},
            el("label", {}, "experiment ", select),
            shown ? el("p", {class: "description", id: "experiment-description"},
                       (shown.description || "(no description in its file)") + (shown.file ? " · " + shown.file : "") + " · " + states)
                  : null);
}

// A form whose fields write the address (so a reload keeps them); `fields`: [name, label, kind,
// choices]; `keep`: parameters of the address the form does not show but carries on.
function filterForm(route, params, fields, keep = []) {
  const inputs = {};
  const form = el("form", {onsubmit: event => {
    event.preventDefault();
    const q = new URLSearchParams();
    for (const name of keep) if (params.has(name)) q.set(name, params.get(name));
    for (const [name, input] of Object.entries(inputs)) {
      const v = input.type === "checkbox" ? (input.checked ? "1" : "") : input.value.trim();
      if (v) q.set(name, v);
    }
    location.hash = "#/" + route + (q.toString() ? "?" + q : "");
  }});
  for (const [name, label, kind = "text", choices = []] of fields) {
    let input;
    if (kind === "select") input = el("select", {name}, choices.map(c => el("option", {value: c, selected: params.get(name) === c ? "" : null}, c)));
    else if (kind === "checkbox") input = el("input", {type: "checkbox", name, checked: params.get(name) === "1"});
    else input = el("input", {type: "text", name, size: name === "where" ? 50 : 14, value: params.get(name) || "", placeholder: label});
    inputs[name] = input;
    form.append(el("label", {}, label + " ", input));
  }
  form.append(el("button", {}, "show"));
  return form;
}

const views = {
  "": {
    live: true,
    controls: params => [filterForm("", params, [["where", "results where"], ["group_by", "group by"], ["metric", "metrics"]], ["experiment"])],
    urls: params => ["api/queue", "api/experiments",
                     "api/results" + query(withDefault(params, "experiment", "latest"), ["where", "group_by", "metric", "experiment"])],
    content: ([queue, experiments, results], params) => {
      const running = queue.running.map(r => [runLink(r.run), r.method, r.dataset, r.seed, r.device,
                                              r.phase ? r.phase.name + " " + r.phase.done + " / " + r.phase.total
                                                      : r.step === null ? "-" : r.step + (r.steps ? " / " + r.steps : ""),
                                              r.eta_seconds === null ? "-" : duration(r.eta_seconds), ago(r.heartbeat_at), r.host]);
      const failed = queue.failed.map(f => [f.job, f.method, f.dataset, f.seed, f.attempts.length,
                                            el("div", {class: "wrap"}, sameErrors(f.attempts).map(({runs, status, error}) =>
                                              el("div", {}, runs.length > 1 ? runs.length + " attempts (" : "", runs.flatMap((r, i) => [i ? ", " : "", runLink(r)]),
                                                 runs.length > 1 ? ")" : "", " " + status + ": " + (error || "-"))))]);
      const header = results.length ? Object.keys(results[0]) : [];
      return [
        el("h2", {id: "queue"}, "Queue"),
        table(Object.keys(queue.counts), [Object.values(queue.counts)], {id: "counts", sortable: false}),
        el("h3", {}, "Running"),
        table(["run", "method", "dataset", "seed", "device", "step", "ETA", "last heartbeat", "host"], running, {id: "running"}),
        el("h3", {}, "Failed"),
        table(["job", "method", "dataset", "seed", "attempts", "error"], failed, {id: "failed"}),
        el("h2", {}, "Results"),
        experimentPicker(experiments, params),
        el("div", {class: "controls-slot"}),
        el("p", {class: "note"}, "per group: jobs, outcomes, and each metric's mean, std, n, min and max over seeds; click a column to sort"),
        table(header, results.map(r => header.map(k => r[k])), {id: "results"}),
      ];
    },
  },

  tables: {
    live: true,
    controls: params => [el("h2", {}, "The papers' tables"),
                         filterForm("tables", params, [["table", "table", "select", ["accuracy", "cost", "variance"]],
                                                       ["where", "where"], ["metric", "accuracy metric"]])],
    urls: params => ["api/table" + query(params, ["table", "where", "metric"])],
    content: ([grid]) => [table(grid.header, grid.text.map(r => r.slice()), {id: "paper-table", sortable: false}), notes(grid.notes)],
  },

  runs: {
    live: true,
    controls: params => [el("h2", {}, "Runs"), filterForm("runs", params, [["where", "where"], ["status", "status (done,failed,...)"],
                                                                            ["columns", "config keys as columns (default: those that differ)"]],
                                                          ["show"])],
    urls: params => ["api/runs" + query(params, ["where", "status", "columns"])],
    // Who the run is (experiment, method, dataset, what differs, seed), how it stands, the headline
    // results, then what the column chooser adds (show=attempt,device,rsd,...: in the address).
    content: ([runs], params) => {
      const names = [...new Set(runs.flatMap(r => Object.keys(r.results)))].sort();
      const keys = [...new Set(runs.flatMap(r => Object.keys(r.params || {})))];
      const headline = HEADLINE_RESULTS.filter(n => names.includes(n));
      const optional = ["attempt", "device", ...names.filter(n => !headline.includes(n))];
      const shown = (params.get("show") || "").split(",").filter(c => optional.includes(c));
      const errors = runs.some(r => r.error);
      const boxes = runs.map(r => el("input", {type: "checkbox", value: r.run, checked: checkedRuns.has(String(r.run)),
                                                onchange: e => (e.target.checked ? checkedRuns.add : checkedRuns.delete).call(checkedRuns, e.target.value)}));
      const overlay = el("button", {onclick: () => {
        const ids = boxes.filter(b => b.checked).map(b => b.value);
        if (ids.length) location.hash = "#/curves?run=" + ids.join(",");
      }}, "overlay the checked runs' curves");
      const chooser = el("details", {class: "columns", id: "column-chooser"}, el("summary", {}, "more columns"),
                         optional.map(c => el("label", {}, el("input", {type: "checkbox", checked: shown.includes(c), onchange: e => {
                           const now = e.target.checked ? [...shown, c] : shown.filter(x => x !== c);
                           setAddress({show: now.length ? now.join(",") : null});
                           current.key = null, refresh();
                         }}), " " + c + " ")));
      const extra = (r, c) => (c === "attempt" ? r.attempt : c === "device" ? r.device : r.results[c] ?? null);
      return [overlay, chooser,
              table(["", "run", "experiment", "method", "dataset", ...shortKeys(keys), "seed", "status", ...headline,
                     ...(errors ? ["error"] : []), "started", "finished", ...shown],
                    runs.map((r, i) => [boxes[i], runLink(r.run), r.experiment, r.method, r.dataset,
                                        ...keys.map(k => (r.params || {})[k] || "-"), r.seed,
                                        el("span", {class: "state-" + r.status}, r.status), ...headline.map(n => r.results[n] ?? null),
                                        ...(errors ? [r.error ? el("span", {class: r.error.length > 60 ? "error wrap" : "error"}, r.error) : "-"] : []),
                                        localTime(r.started_at), r.finished_at ? localTime(r.finished_at) : "-",
                                        ...shown.map(c => extra(r, c))]), {id: "runs"})];
    },
  },

  run: {
    live: true,
    controls: (params, id) => [filterForm("run/" + id, params, [["x", "x axis", "select", ["step", "time"]]])],
    urls: (params, id) => ["api/run?id=" + encodeURIComponent(id)],
    content: ([run], params) => {
      const x = params.get("x") === "time" ? 1 : 0;
      const curve = (split, name) => run.curves.find(c => c.split === split && c.name === name);
      const drawn = [];
      for (const [name, title] of [["loss", "loss"], ["acc", "accuracy"]]) {
        const series = ["train", "val"].map(split => curve(split, name)).filter(c => c)
                                      .map(c => ({label: c.label, points: c.points.map(p => ({x: p[x], y: p[2]}))}));
        if (series.length) drawn.push(chart({title, xLabel: x ? "wall-clock seconds since the run started" : "step", yLabel: title, series}));
      }
      const results = Object.entries(run.results).map(([name, v]) => [name, cellText(name, v)]);
      const env = run.environment;
      return [
        el("h2", {}, `run ${run.run}: ${run.method} on ${run.dataset}, seed ${run.seed}`),
        el("p", {}, el("span", {class: "state-" + run.status, id: "run-status"}, run.status), ` · attempt ${run.attempt} · experiment ${run.experiment} · job ${run.job}`,
           run.error ? el("span", {class: "error"}, " · " + run.error) : null),
        drawn.length ? el("div", {class: "charts"}, drawn)
                     : ENDED_BADLY.includes(run.status)
                       ? el("p", {class: "error", id: "no-curve"}, `this run ended ${run.status} before it wrote a curve point` + (run.error ? ": " + run.error : ""))
                       : el("p", {class: "note", id: "no-curve"}, "no curve points yet: a run writes them at each validation, and every 10 s between"),
        el("h3", {}, "Results"),
        table(["result", "value"], results, {id: "run-results"}),
        el("h3", {}, "Environment"),
        table(["host", "device", "device name", "LibTorch", "attnlab", "git revision", "threads"],
              [[env.host, env.device, env.device_name, env.torch_version, env.attnlab_version, env.git_revision, env.threads]], {sortable: false}),
        ...(env.warnings || []).map(w => el("p", {class: "error run-warning"}, "warning: " + w)),
        table(["plugin", "kind", "version", "sha256", "path"], run.plugins.map(p => [p.name, p.kind, p.version, p.sha256, p.path])),
        el("h3", {}, "Attempts"),
        table(["run", "attempt", "status", "host", "device", "started", "finished", "error"],
              run.attempts.map(a => [runLink(a.run), a.attempt, a.status, a.host, a.device, localTime(a.started_at), a.finished_at ? localTime(a.finished_at) : "-", a.error || "-"])),
        el("h3", {}, "Configuration"),
        el("pre", {}, run.config),
        el("h3", {}, "Other curves"),
        table(["curve", "points", "last value"], run.curves.map(c => [c.label, c.points.length, c.points.length ? c.points[c.points.length - 1][2] : null])),
      ];
    },
  },

  curves: {
    live: true,
    controls: params => [el("h2", {}, "Curves"),
                         filterForm("curves", params, [["where", "where"], ["run", "runs (1,2,...)"], ["split", "split (val)"],
                                                       ["metric", "curves (loss,acc,lr: side by side)"], ["group_by", "group by"],
                                                       ["mean", "mean ± std over seeds", "checkbox"], ["x", "x axis", "select", ["step", "time"]],
                                                       ["y", "y axis", "select", ["linear", "log"]], ["smooth", "smoothing (0 to 0.99)"]])],
    urls: params => (params.get("where") || params.get("run")
      ? metricsOf(params).map(m => "api/curves" + query(withValue(params, "metric", m), ["where", "run", "split", "metric", "group_by", "mean"]))
      : []),
    content: (answers, params) => {
      if (!answers.length) return [el("p", {}, "Name runs (where, or run ids) to draw their curves.")];
      const x = params.get("x") === "time" ? 1 : 0;
      const xLabel = x ? "wall-clock seconds since the run started" : "step";
      const smooth = Math.min(0.99, Math.max(0, Number(params.get("smooth")) || 0));
      const shown = answers.map(curves => ({curves, series: curveSeries(curves, x, smooth)}));
      const first = answers[0];
      const xRange = ["xmin", "xmax"].map(k => Number(params.get(k)));
      const zoomed = params.has("xmin") && params.has("xmax") && xRange.every(Number.isFinite) && xRange[0] < xRange[1];
      const onZoom = xs => setAddress(xs ? {xmin: +xs[0].toPrecision(6), xmax: +xs[1].toPrecision(6)} : {xmin: null, xmax: null});
      return [el("div", {class: "charts"}, shown.map(({curves, series}) =>
                chart({title: curves.label, xLabel, yLabel: curves.label, series, yLog: params.get("y") === "log",
                       shared: curves.shared ? "every line: " + curves.shared : "", xRange: zoomed ? xRange : null, onZoom}))),
              el("p", {class: "downloads"}, "what is shown: ",
                 downloadLink("CSV", "curves.csv", "text/csv", () => curvesCsv(shown)), " ",
                 downloadLink("JSON", "curves.json", "application/json", () => JSON.stringify(shown.map(({curves, series}) =>
                   ({split: curves.split, metric: curves.metric, series: series.filter(s => !s.faint)})), null, 1)),
                 " · ", link(location.hash, "link to this view")),
              first.jobs_without_run ? el("p", {class: "note"}, first.jobs_without_run + " matching job(s) with no run that counts yet left out") : null,
              [...new Set(answers.flatMap(a => a.left_out || []))].map(why => el("p", {class: "note left-out"}, "left out: " + why))];
    },
  },

  compare: {
    live: false,
    controls: params => [el("h2", {}, "Compare two methods on their shared tasks"),
                         filterForm("compare", params, [["a", "A"], ["b", "B"], ["metric", "metric (test_acc)"], ["by", "by (dataset)"],
                                                        ["where", "where"], ["ci", "interval", "select", ["welch", "bootstrap"]]])],
    urls: params => (params.get("a") && params.get("b") ? ["api/compare" + query(params, ["a", "b", "metric", "by", "where", "ci"])] : []),
    content: ([grid]) => (grid ? [table(grid.header, grid.text.map(r => r.slice()), {id: "compare"}), notes(grid.notes)]
                               : [el("p", {}, "Name the two sides: a method, or a where expression.")]),
  },

  bench: {
    live: false,
    controls: params => [el("h2", {}, "attnlab bench: time and memory against length")],
    urls: () => ["api/bench"],
    content: ([rows]) => {
      if (!rows.length)
        return [el("p", {class: "note", id: "empty"}, "No bench results in this database yet. Measure some: ",
                   el("code", {}, "attnlab bench --db THIS.db --methods softmax,skyformer --lengths 1024,2048,4096"),
                   " (each method's training step, time and peak memory, in a fresh process per length).")];
      const done = rows.filter(r => r.status === "done");
      const key = r => `${r.method} (${r.device}, ${r.precision}${r.part === "attention" ? ", attention only" : ""}, batch ${r.batch_size})`;
      const groups = new Map();
      for (const r of done) {
        if (!groups.has(key(r))) groups.set(key(r), []);
        groups.get(key(r)).push(r);
      }
      const lengths = [...new Set(done.map(r => r.seq_len))].sort((a, b) => a - b);  // marked on x as measured
      // the latest measurement per length (rows come oldest first)
      const series = value => [...groups].map(([label, rs]) => {
        const last = new Map(rs.map(r => [r.seq_len, r]));
        return {label, points: [...last.values()].sort((a, b) => a.seq_len - b.seq_len).map(r => ({x: r.seq_len, y: value(r)}))};
      });
      return [
        el("div", {class: "charts"},
           chart({title: "step time (median)", xLabel: "sequence length", yLabel: "seconds", series: series(r => r.step_seconds_median), xLog: true, yLog: true, xTicks: lengths}),
           chart({title: "peak memory", xLabel: "sequence length", yLabel: "MiB", series: series(r => r.peak_memory_bytes / 2 ** 20), xLog: true, yLog: true, xTicks: lengths})),
        table(["method", "length", "batch", "precision", "part", "device", "median s", "min s", "max s", "peak memory", "status", "measured"],
              rows.map(r => [r.method, r.seq_len, r.batch_size, r.precision, r.part, r.device_name || r.device, r.step_seconds_median,
                             r.step_seconds_min, r.step_seconds_max, bytes(r.peak_memory_bytes), r.status + (r.error ? ": " + r.error : ""), localTime(r.created_at)]), {id: "bench"}),
      ];
    },
  },

  approx: {
    live: false,
    controls: () => [el("h2", {}, "attnlab approx: error against exact attention, against d")],
    urls: () => ["api/approx"],
    content: ([rows]) => {
      if (!rows.length)
        return [el("p", {class: "note", id: "empty"}, "No approximation results in this database yet. Measure some: ",
                   el("code", {}, "attnlab approx --db THIS.db --methods skyformer,nystromformer --dataset listops"),
                   " (each method's spectral-norm error against exact attention, against d).")];
      const groups = new Map();
      for (const r of rows) {
        const label = `${r.method} vs ${r.reference}, n=${r.seq_len}`;
        if (!groups.has(label)) groups.set(label, new Map());
        groups.get(label).set(r.features, r);
      }
      const series = [...groups].map(([label, byD]) => ({label, points: [...byD.values()].sort((a, b) => a.features - b.features)
                                                                             .map(r => ({x: r.features, y: r.rel_error_mean}))}));
      const ds = [...new Set(rows.map(r => r.features))].sort((a, b) => a - b);  // marked on x as measured
      return [chart({title: "relative spectral-norm error", xLabel: "d (features or landmarks)", yLabel: "‖A − A_exact‖₂ / ‖A_exact‖₂", series, xLog: true, yLog: true, xTicks: ds}),
              table(["method", "reference", "param", "d", "length", "samples", "rel. error", "± std", "abs. error", "± std", "source", "measured"],
                    rows.map(r => [r.method, r.reference, r.param, r.features, r.seq_len, r.samples, r.rel_error_mean, r.rel_error_std,
                                   r.abs_error_mean, r.abs_error_std, r.source, localTime(r.created_at)]), {id: "approx"})];
    },
  },
};

// ---- routing and the live loop ----
let current = null;  // {view, params, id, controls, content, key}
let updates = 0;
const checkedRuns = new Set();  // the runs table's checked boxes, by run id: a redraw keeps them

function route() {
  const hash = location.hash.replace(/^#\/?/, "");
  const [path, search = ""] = hash.split("?");
  const [name, id] = path.split("/");
  return {name: views[name] ? name : "", id: id || "", params: new URLSearchParams(search)};
}

async function refresh() {
  const view = current;
  const status = document.getElementById("status");
  try {
    const urls = view.view.urls(view.params, view.id);
    const answers = await Promise.all(urls.map(u => (u.startsWith("api/curves") ? getCurves(u) : u.startsWith("api/runs") ? getRuns(u) : get(u))));
    if (view !== current) return;  // the address changed meanwhile
    const key = answers.map(a => a.text).join("\n");
    if (key !== view.key) {
      view.key = key;
      const scroll = [window.scrollX, window.scrollY];  // a redraw never moves what the reader looks at
      view.content.style.minHeight = view.content.offsetHeight + "px";
      for (const c of charts) c.destroy();
      charts = [], pendingCharts = [];
      view.content.replaceChildren(...[view.view.content(answers.map(a => a.body), view.params, view.id)].flat(2).filter(n => n));
      const slot = view.content.querySelector(".controls-slot");  // a view that places its filters itself
      if (slot) slot.replaceWith(view.controls);
      for (const make of pendingCharts) make();
      view.content.style.minHeight = "";
      window.scrollTo(...scroll);
    }
    status.textContent = "updated " + new Date().toLocaleTimeString();
    status.className = "";
    document.body.dataset.updates = ++updates;
  } catch (e) {
    // a bad filter is said beside the view; an unreadable database (503) in the header too
    status.textContent = e.status === 503 ? e.message : "updated " + new Date().toLocaleTimeString();
    status.className = e.status === 503 ? "error" : "";
    view.key = null;
    view.content.replaceChildren(el("p", {class: "error", id: "error"}, e.message));
    if (!view.controls.isConnected) view.content.prepend(view.controls);  // the filters stay, to fix
  }
}

function show() {
  const {name, id, params} = route();
  const view = views[name];
  const controls = el("div", {}, [view.controls(params, id)].flat(2));
  const content = el("div", {id: "content"});
  document.getElementById("view").replaceChildren(controls, content);
  for (const a of document.querySelectorAll("#nav a")) a.className = a.getAttribute("href") === "#/" + name ? "current" : "";
  document.body.dataset.view = name;
  current = {view, params, id, controls, content, key: null};
  heldAnswers.clear();
  refresh();
}

window.addEventListener("hashchange", show);
show();
setInterval(() => { if (current && current.view.live) refresh(); }, POLL_MS);  // a worker's writes show without a reload
