// attnlab serve's page: one view per route (#/, #/tables, #/runs, #/run/N, #/curves, #/sweep,
// #/compare, #/bench, #/approx), each drawn from the JSON endpoints (runner/serve/README.md), and
// the live loop; the helpers it draws with are in dom.js, charts.js and data.js. Every value is
// written as text (textContent, text nodes; never innerHTML), so a name holding markup shows as
// that text. Live views poll every 2 s and redraw only when an answer changed; a view's filters
// live in the address (#/runs?where=...), so a reload or a shared link shows the same thing.
"use strict";

const POLL_MS = 2000;

// ---- the views: controls (drawn once per address) and content (redrawn when its data changed) ----
// The queue: counts per state, the running jobs with their progress, and every job that ended
// without a result (failed, diverged, out of memory, blocked) with each distinct error once.
function queueSection(queue) {
  const running = queue.running.map(r => [runLink(r.run), r.method, r.dataset, r.seed, r.device,
                                          r.phase ? r.phase.name + " " + r.phase.done + " / " + r.phase.total
                                                  : r.step === null ? "-" : r.step + (r.steps ? " / " + r.steps : ""),
                                          r.eta_seconds === null ? "-" : duration(r.eta_seconds), ago(r.heartbeat_at), r.host]);
  const failed = queue.failed.map(f => [f.job, f.method, f.dataset, f.seed, el("span", {class: "state-" + f.state}, f.state), f.attempts.length,
                                        el("div", {class: "wrap"}, sameErrors(f.attempts).map(({runs, status, error}) =>
                                          el("div", {}, runs.length > 1 ? runs.length + " attempts (" : "", runs.flatMap((r, i) => [i ? ", " : "", runLink(r)]),
                                             runs.length > 1 ? ")" : "", " " + status + ": " + (error || "-"))))]);
  return [
    el("h2", {id: "queue"}, "Queue"),
    table(Object.keys(queue.counts), [Object.values(queue.counts)], {id: "counts", sortable: false}),
    el("h3", {}, "Running"),
    table(["run", "method", "dataset", "seed", "device", "step", "ETA", "last heartbeat", "host"], running, {id: "running"}),
    el("h3", {}, "Ended without a result (failed, diverged, out of memory, blocked)"),
    table(["job", "method", "dataset", "seed", "state", "attempts", "error"], failed, {id: "failed"}),
  ];
}

// The keys of /api/results' rows (its groups, before "jobs") whose values differ among the rows
// with the result: method and dataset where they do, then the config keys.
function sweptKeys(rows, metric) {
  const withResult = rows.filter(r => Number.isFinite(r[metric + "_mean"]));
  if (!withResult.length) return [];
  const groupKeys = Object.keys(withResult[0]).slice(0, Object.keys(withResult[0]).indexOf("jobs"));
  return groupKeys.filter(k => new Set(withResult.map(r => r[k])).size > 1);
}

// A link that saves `make()`'s text as a file, made when clicked (what is shown at that moment)
function downloadLink(text, name, type, make) {
  return el("a", {href: "#", download: name, onclick: event => {
    event.currentTarget.href = URL.createObjectURL(new Blob([make()], {type}));
  }}, text);
}

const csvQuote = v => (/[",\n]/.test(String(v)) ? '"' + String(v).replace(/"/g, '""') + '"' : String(v));

// A table's rows as CSV: numbers at full precision, a cell drawn as an element by its text.
function tableCsv(header, rows) {
  const cell = v => (v === null || v === undefined ? "" : v instanceof Node ? v.textContent : v);
  return [header, ...rows].map(row => row.map(v => csvQuote(cell(v))).join(",")).join("\n") + "\n";
}

function curvesCsv(shown) {
  const quote = csvQuote;
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
  return el("div", {class: "experiment"}, el("label", {}, "experiment ", select));
}

// The experiment shown: its description, file and jobs per state (which change as jobs end: this
// line is redrawn, the picker above it is not).
function experimentSummary(experiments, params) {
  if (!experiments.length) return null;
  const chosen = params.get("experiment") || experiments[experiments.length - 1].name;
  const shown = experiments.find(e => e.name === chosen);
  if (!shown) return null;
  const states = Object.entries(shown.states).map(([state, n]) => `${n} ${state}`).join(", ");
  return el("p", {class: "description", id: "experiment-description"},
            (shown.description || "(no description in its file)") + (shown.file ? " · " + shown.file : "") + " · " + states);
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
  // Sections, each redrawn only when its own answers changed, with the filters among them never
  // redrawn or moved: typing in "results where" keeps the focus while the queue runs, and the
  // experiment picker is drawn again only when the experiments themselves change.
  "": {
    live: true,
    controls: params => [filterForm("", params, [["where", "results where"], ["group_by", "group by"], ["metric", "metrics"]], ["experiment"])],
    urls: params => ["api/queue", "api/experiments",
                     "api/results" + query(withDefault(params, "experiment", "latest"), ["where", "group_by", "metric", "experiment"])],
    sections: [
      {uses: [0], draw: ([queue]) => queueSection(queue)},
      {uses: [1], key: ([experiments]) => JSON.stringify(experiments.map(e => [e.name, e.jobs])),
       draw: ([experiments], params) => [el("h2", {}, "Results"), experimentPicker(experiments, params)]},
      {uses: [1], draw: ([experiments], params) => experimentSummary(experiments, params)},
      "controls",
      {uses: [2], draw: ([results]) => {
        const header = results.length ? Object.keys(results[0]) : [];
        const rows = results.map(r => header.map(k => r[k]));
        return [el("p", {class: "note"}, "per group: jobs, outcomes, and each metric's mean, std, n, min and max over seeds; click a column to sort · ",
                   downloadLink("CSV", "results.csv", "text/csv", () => tableCsv(header, rows))),
                table(header, rows, {id: "results"})];
      }},
    ],
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
      const checked = new Set((params.get("checked") || "").split(",").filter(id => id));  // in the address: a reload keeps them
      const boxes = runs.map(r => el("input", {type: "checkbox", value: r.run, checked: checked.has(String(r.run)), onchange: e => {
        (e.target.checked ? checked.add : checked.delete).call(checked, e.target.value);
        setAddress({checked: checked.size ? [...checked].join(",") : null});
      }}));
      const overlay = el("button", {onclick: () => {
        const ids = boxes.filter(b => b.checked).map(b => b.value);
        if (ids.length) location.hash = "#/curves?run=" + ids.join(",");
      }}, "overlay the checked runs' curves");
      const chooser = el("details", {class: "columns", id: "column-chooser", open: columnsOpen ? "" : null,
                                     ontoggle: e => { columnsOpen = e.target.open; }}, el("summary", {}, "more columns"),
                         optional.map(c => el("label", {}, el("input", {type: "checkbox", checked: shown.includes(c), onchange: e => {
                           const now = e.target.checked ? [...shown, c] : shown.filter(x => x !== c);
                           setAddress({show: now.length ? now.join(",") : null});
                           current.key = null, refresh();
                         }}), " " + c + " ")));
      const extra = (r, c) => (c === "attempt" ? r.attempt : c === "device" ? r.device : r.results[c] ?? null);
      const csv = downloadLink("CSV", "runs.csv", "text/csv", () => tableCsv(
        ["run", "experiment", "method", "dataset", ...keys, "seed", "status", ...names, "attempt", "device", "error", "started_at", "finished_at"],
        runs.map(r => [r.run, r.experiment, r.method, r.dataset, ...keys.map(k => (r.params || {})[k] ?? ""), r.seed, r.status,
                       ...names.map(n => r.results[n] ?? ""), r.attempt, r.device, r.error || "", r.started_at, r.finished_at || ""])));
      return [overlay, " ", csv, chooser,
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
      const drawn = [], nan = [];
      for (const [name, title] of [["loss", "loss"], ["acc", "accuracy"]]) {
        const curves = ["train", "val"].map(split => curve(split, name)).filter(c => c);
        for (const c of curves) {  // a diverged run's NaN (null in JSON): said, since a chart cannot draw it
          const first = c.points.find(p => !Number.isFinite(p[2]));
          if (first) nan.push(el("p", {class: "error nan"}, `${c.label}: not a number from step ${first[0]} on` +
                                 (c.points.some(p => Number.isFinite(p[2])) ? " (drawn up to there)" : " (every point: nothing to draw)")));
        }
        const series = curves.filter(c => c.points.some(p => Number.isFinite(p[2])))
                             .map(c => ({label: c.label, points: c.points.map(p => ({x: p[x], y: p[2]}))}));
        if (series.length) drawn.push(chart({title, xLabel: x ? "wall-clock seconds since the run started" : "step", yLabel: title, series}));
      }
      const results = Object.entries(run.results).map(([name, v]) => [name, cellText(name, v)]);
      const env = run.environment;
      return [
        el("h2", {}, `run ${run.run}: ${run.method} on ${run.dataset}, seed ${run.seed}`),
        el("p", {}, el("span", {class: "state-" + run.status, id: "run-status"}, run.status), ` · attempt ${run.attempt} · experiment ${run.experiment} · job ${run.job}`,
           run.error ? el("span", {class: "error"}, " · " + run.error) : null),
        nan,
        drawn.length ? el("div", {class: "charts"}, drawn)
                     : run.curves.some(c => c.points.length) ? null
                     : run.status !== "running"
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
                                                       ["y", "y axis", "select", ["linear", "log"]], ["smooth", "smoothing (0 to 0.99)"],
                                                       ["color_by", "colour by (method, lr, seed, ...)"]])],
    urls: params => (params.get("where") || params.get("run")
      ? metricsOf(params).map(m => "api/curves" + query(withValue(params, "metric", m), ["where", "run", "split", "metric", "group_by", "mean"]))
      : []),
    content: (answers, params) => {
      if (!answers.length) return [el("p", {}, "Name runs (where, or run ids) to draw their curves.")];
      const x = params.get("x") === "time" ? 1 : 0;
      const xLabel = x ? "wall-clock seconds since the run started" : "step";
      const smooth = Math.min(0.99, Math.max(0, Number(params.get("smooth")) || 0));
      const shown = curvesShown = answers.map(curves => ({curves, series: curveSeries(curves, x, smooth, params.get("color_by") || "")}));
      const first = answers[0];
      const xRange = ["xmin", "xmax"].map(k => Number(params.get(k)));
      const zoomed = params.has("xmin") && params.has("xmax") && xRange.every(Number.isFinite) && xRange[0] < xRange[1];
      const onZoom = xs => setAddress(xs ? {xmin: +xs[0].toPrecision(6), xmax: +xs[1].toPrecision(6)} : {xmin: null, xmax: null});
      const drawn = shown.filter(({series}) => series.length);  // no chart without a line: the notes say why
      return [drawn.length ? null : el("p", {class: "note", id: "no-curve"}, "no run selected has points for this curve"),
              el("div", {class: "charts"}, drawn.map(({curves, series}) =>
                chart({title: curves.label, xLabel, yLabel: curves.label, series, yLog: params.get("y") === "log",
                       shared: curves.shared ? "every line: " + curves.shared : "", xRange: zoomed ? xRange : null, onZoom}))),
              el("p", {class: "downloads"}, "what is shown: ",
                 downloadLink("CSV", "curves.csv", "text/csv", () => curvesCsv(curvesShown)), " ",
                 downloadLink("JSON", "curves.json", "application/json", () => JSON.stringify(curvesShown.map(({curves, series}) =>
                   ({split: curves.split, metric: curves.metric, series: series.filter(s => !s.faint)})), null, 1)),
                 " · ", link(location.hash, "link to this view")),
              first.jobs_without_run ? el("p", {class: "note"}, first.jobs_without_run + " matching job(s) with no run that counts yet left out") : null,
              [...new Set(answers.flatMap(a => a.left_out || []))].map(why => el("p", {class: "note left-out"}, "left out: " + why))];
    },
    // A poll that brought new points of the same lines: drawn into the charts in place.
    patch: (answers, params, id, content) => {
      const what = a => JSON.stringify([a.shared, a.left_out, a.jobs_without_run]);
      if (answers.length !== curvesShown.length || answers.some((a, i) => what(a) !== what(curvesShown[i].curves))) return false;
      const x = params.get("x") === "time" ? 1 : 0;
      const smooth = Math.min(0.99, Math.max(0, Number(params.get("smooth")) || 0));
      const boxes = [...content.querySelectorAll(".chart")];
      const shown = answers.map(curves => ({curves, series: curveSeries(curves, x, smooth, params.get("color_by") || "")}));
      const drawn = shown.filter(({series}) => series.length);
      if (boxes.length !== drawn.length || !boxes.every(b => b.setSeries)) return false;
      if (!drawn.every(({series}, i) => boxes[i].setSeries(series))) return false;  // a chart not updated: all anew
      curvesShown = shown;
      return true;
    },
  },

  // A sweep: a result against one swept key (each configuration a point, mean ± std over its seeds,
  // a line per value of the other keys), and every configuration across all the swept keys at once
  // (parallel coordinates, coloured by the result). From /api/results' groups: the keys that vary.
  sweep: {
    live: true,
    controls: params => [el("h2", {}, "A sweep: a result against its keys"),
                         filterForm("sweep", params, [["where", "where"], ["metric", "result (test_acc)"], ["x", "x: a swept key"]])],
    urls: params => ["api/results" + query(withDefault(params, "metric", "test_acc"), ["where", "metric"])],
    content: ([rows], params) => {
      const metric = params.get("metric") || "test_acc";
      const keys = sweptKeys(rows, metric);
      if (!keys.length)
        return [el("p", {class: "note", id: "no-sweep"}, "no key varies among the configurations selected (name a sweep with where)")];
      const done = rows.filter(r => Number.isFinite(r[metric + "_mean"]));
      const x = keys.includes(params.get("x")) ? params.get("x") : keys.find(k => done.every(r => Number.isFinite(Number(r[k])))) || keys[0];
      const numeric = done.every(r => Number.isFinite(Number(r[x])));
      const others = keys.filter(k => k !== x);
      const lineOf = r => others.map(k => (k === "method" || k === "dataset" ? r[k] : k.split(".").pop() + "=" + r[k])).join(" ");
      const lines = new Map();
      for (const r of done) {
        if (!lines.has(lineOf(r))) lines.set(lineOf(r), []);
        lines.get(lineOf(r)).push(r);
      }
      const xs = [...new Set(done.map(r => r[x]))].sort((a, b) => (numeric ? Number(a) - Number(b) : String(a).localeCompare(String(b))));
      const at = r => (numeric ? Number(r[x]) : xs.indexOf(r[x]));
      const series = [...lines].map(([label, rs]) => {
        const sorted = rs.slice().sort((a, b) => at(a) - at(b));
        return {label: label || metric, points: sorted.map(r => ({x: at(r), y: r[metric + "_mean"]})),
                band: sorted.map(r => ({x: at(r), lo: r[metric + "_mean"] - (r[metric + "_std"] || 0), hi: r[metric + "_mean"] + (r[metric + "_std"] || 0)}))};
      });
      const positive = numeric && xs.every(v => Number(v) > 0);
      const wide = positive && Math.max(...xs.map(Number)) / Math.min(...xs.map(Number)) >= 20;
      return [el("p", {class: "note"}, `${done.length} configurations; ${metric}: mean ± std over each one's seeds; swept: ${keys.join(", ")}`),
              el("div", {class: "charts"},
                 chart({title: `${metric} against ${x}`, xLabel: x + (numeric ? "" : " (" + xs.join(", ") + ")"), yLabel: metric, series,
                        xLog: wide, xTicks: numeric ? xs.map(Number) : xs.map((_, i) => i)}),
                 parallelCoordinates(done, keys, metric)),
              table(Object.keys(rows[0] || {}), rows.map(r => Object.values(r)), {id: "sweep"})];
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
let current = null;  // {view, params, id, controls, content, key, sections}
let updates = 0;
let columnsOpen = false;        // the runs table's "more columns" panel, open or not: a redraw keeps it
let curvesShown = [];           // the curves view's answers and series as drawn (its downloads, its patch)

function route() {
  const hash = location.hash.replace(/^#\/?/, "");
  const [path, search = ""] = hash.split("?");
  const [name, id] = path.split("/");
  return {name: views[name] ? name : "", id: id || "", params: new URLSearchParams(search)};
}

// `redraw()` of `container` without moving what the reader looks at: the page keeps its height
// meanwhile, and its scroll position after.
function keepingScroll(container, redraw) {
  const scroll = [window.scrollX, window.scrollY];
  container.style.minHeight = container.offsetHeight + "px";
  redraw();
  container.style.minHeight = "";
  window.scrollTo(...scroll);
}

// A view drawn whole when an answer changed, or patched in place where the view can (new curve
// points of the same lines).
function drawWhole(view, answers) {
  const key = answers.map(a => a.text).join("\n");
  if (key === view.key) return;
  const bodies = answers.map(a => a.body);
  const patched = view.key !== null && view.view.patch && view.view.patch(bodies, view.params, view.id, view.content);
  view.key = key;
  if (patched) return;
  keepingScroll(view.content, () => {
    for (const c of charts) c.destroy();
    charts = [], pendingCharts = [];
    view.content.replaceChildren(...[view.view.content(bodies, view.params, view.id)].flat(2).filter(n => n));
    for (const make of pendingCharts) make();
  });
}

// A view of sections ({uses: answer indices, key(bodies) optional, draw(bodies, params)}, and
// "controls" where its filters sit): each redrawn only when what it shows changed.
function drawSections(view, answers) {
  if (!view.sections) {
    view.sections = view.view.sections.map(s => (s === "controls" ? {node: view.controls} : {...s, node: el("div"), drawn: null}));
    view.content.replaceChildren(...view.sections.map(s => s.node));
  }
  for (const s of view.sections.filter(s => s.draw)) {
    const bodies = s.uses.map(i => answers[i].body);
    const key = s.key ? s.key(bodies) : s.uses.map(i => answers[i].text).join("\n");
    if (key === s.drawn) continue;
    s.drawn = key;
    keepingScroll(s.node, () => s.node.replaceChildren(...[s.draw(bodies, view.params, view.id)].flat(2).filter(n => n)));
  }
}

async function refresh() {
  const view = current;
  const status = document.getElementById("status");
  try {
    const urls = view.view.urls(view.params, view.id);
    const answers = await Promise.all(urls.map(u => (u.startsWith("api/curves") ? getCurves(u) : u.startsWith("api/runs") ? getRuns(u) : get(u))));
    if (view !== current) return;  // the address changed meanwhile
    (view.view.sections ? drawSections : drawWhole)(view, answers);
    status.textContent = "updated " + new Date().toLocaleTimeString();
    status.className = "";
    document.body.dataset.updates = ++updates;
  } catch (e) {
    // a bad filter is said beside the view; an unreadable database (503) in the header too
    status.textContent = e.status === 503 ? e.message : "updated " + new Date().toLocaleTimeString();
    status.className = e.status === 503 ? "error" : "";
    view.key = null, view.sections = null;
    view.content.replaceChildren(el("p", {class: "error", id: "error"}, e.message));
    if (!view.controls.isConnected) view.content.prepend(view.controls);  // the filters stay, to fix
  }
}

function show() {
  const {name, id, params} = route();
  const view = views[name];
  const controls = el("div", {}, [view.controls(params, id)].flat(2));
  const content = el("div", {id: "content"});
  document.getElementById("view").replaceChildren(...(view.sections ? [] : [controls]), content);  // sections place theirs
  for (const a of document.querySelectorAll("#nav a")) a.className = a.getAttribute("href") === "#/" + name ? "current" : "";
  document.body.dataset.view = name;
  current = {view, params, id, controls, content, key: null, sections: null};
  heldAnswers.clear();
  refresh();
}

window.addEventListener("hashchange", show);
show();
setInterval(() => { if (current && current.view.live) refresh(); }, POLL_MS);  // a worker's writes show without a reload
