// attnlab serve's page: reads the JSON endpoints and writes every value as text (textContent,
// never innerHTML), so a name holding markup shows as that text.
"use strict";

function table(element, header, rows) {
  element.replaceChildren();
  const head = element.insertRow();
  for (const name of header) {
    const th = document.createElement("th");
    th.textContent = name;
    head.appendChild(th);
  }
  for (const row of rows) {
    const tr = element.insertRow();
    for (const value of row) tr.insertCell().textContent = value === null ? "-" : String(value);
  }
}

async function json(url) {
  const response = await fetch(url, {cache: "no-store"});
  const body = await response.json();
  if (!response.ok) throw new Error(body.error || response.statusText);
  return body;
}

async function refreshQueue() {
  const queue = await json("api/queue");
  table(document.getElementById("counts"), Object.keys(queue.counts), [Object.values(queue.counts)]);
  table(document.getElementById("running"), ["job", "method", "dataset", "seed", "device", "heartbeat"],
        queue.running.map(r => [r.job, r.method, r.dataset, r.seed, r.device, r.heartbeat_at]));
  table(document.getElementById("failed"), ["job", "method", "dataset", "seed", "attempt errors"],
        queue.failed.map(f => [f.job, f.method, f.dataset, f.seed,
                               f.attempts.map(a => `run ${a.run}: ${a.error}`).join(" | ")]));
}

async function refreshResults() {
  const where = document.getElementById("where").value.trim();
  const error = document.getElementById("results-error");
  try {
    const rows = await json("api/results" + (where ? "?where=" + encodeURIComponent(where) : ""));
    error.textContent = "";
    table(document.getElementById("results"), rows.length ? Object.keys(rows[0]) : [], rows.map(r => Object.values(r)));
  } catch (e) {
    error.textContent = e.message;
  }
}

async function refresh() {
  const status = document.getElementById("status");
  try {
    await Promise.all([refreshQueue(), refreshResults()]);
    status.textContent = "updated " + new Date().toLocaleTimeString();
  } catch (e) {
    status.textContent = e.message;
    status.className = "error";
  }
}

document.getElementById("filter").addEventListener("submit", event => {
  event.preventDefault();
  refreshResults();
});
refresh();
setInterval(refresh, 2000);  // a worker writing to the database shows without a reload
