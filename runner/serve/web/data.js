// attnlab serve's page, its data: the JSON answers fetched (polled for what changed only) and
// curves made into chart series (smoothed, coloured by a key).
"use strict";

// ---- the answers: fetched, and polled for what changed ----
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
// What a run or mean of /api/curves has of `key`, as its labels say it: "softmax" (method,
// dataset), "seed 3", or a swept key's word of its group ("lr=0.001" for lr or train.lr); "-" for none.
function groupWord(item, key) {
  if (key === "method" || key === "dataset") return String(item[key]);
  if (key === "seed") return item.seed === undefined ? "-" : "seed " + item.seed;
  const name = key.split(".").pop();
  return (item.group || "").split(" ").find(w => w.startsWith(name + "=")) || name + "=-";
}

function curveSeries(curves, x, smooth, colourBy = "") {
  const items = curves.means.length ? curves.means : curves.runs;
  let base = curves.means.length
    ? curves.means.map(m => ({label: m.short_label || m.label, run: m.runs.join(" "), points: m.points.map(p => ({x: p[x], y: p[2]})),
                              band: m.runs.length > 1 ? m.points.map(p => ({x: p[x], lo: p[2] - p[3], hi: p[2] + p[3]})) : null}))
    : curves.runs.map(r => ({label: r.short_label || r.label, run: String(r.run), points: r.points.map(p => ({x: p[x], y: p[2]}))}));
  if (colourBy) {
    base = base.map((s, i) => ({...s, group: groupWord(items[i], colourBy)}));
    const colours = groupColours(base);
    base = base.map((s, i) => ({...s, color: colours[i]}));
  }
  if (!(smooth > 0)) return base;
  return base.flatMap((s, i) => {
    const color = s.color || colour(i);
    const band = s.band && (([lo, hi]) => lo.map((p, j) => ({x: p.x, lo: p.y, hi: hi[j].y})))(
      ["lo", "hi"].map(edge => ema(s.band.map(p => ({x: p.x, y: p[edge]})), smooth)));  // the band smoothed as its line
    return [{...s, color, faint: true, band: null}, {...s, color, points: ema(s.points, smooth), band, smoothed: smooth}];
  });
}
