// attnlab serve's page, its DOM helpers: elements whose strings always become text nodes, values
// in their units, sortable tables, CSV. (The page's scripts, in order: dom.js, charts.js, data.js,
// app.js; index.html loads them after Chart.js.)
"use strict";

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
