"""The JobSet view's page: one self-contained HTML document (inline CSS and vanilla
JavaScript, nothing fetched but its own data), shown in the task instance's "JobSet" tab.

Every text from the cluster is put in the page with ``textContent`` (never as HTML).
"""

from __future__ import annotations

__all__ = ["PAGE", "REFRESH_SECONDS", "RUN_PAGE"]

#: How often the page reads its data again while the run is not finished.
REFRESH_SECONDS = 5

PAGE = """<!doctype html>
<html lang="en"><head><meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
<title>JobSet</title>
<style>
:root { color-scheme: light dark; --ok:#2e7d32; --bad:#c62828; --run:#1565c0; --wait:#8d6e63;
  --line:#8884; font: 14px/1.4 system-ui, sans-serif; }
body { margin: 12px; }
h2 { font-size: 15px; margin: 18px 0 6px; }
.head { display:flex; flex-wrap:wrap; gap:8px 18px; align-items:baseline; }
.badge { padding:1px 8px; border-radius:10px; color:#fff; font-weight:600; }
.Completed,.Succeeded { background:var(--ok); } .Failed { background:var(--bad); }
.Running { background:var(--run); } .Pending,.Suspended,.Unknown { background:var(--wait); }
.note { color:#b26a00; } .muted { opacity:.7; }
table { border-collapse:collapse; } td,th { border:1px solid var(--line); padding:3px 6px;
  vertical-align:top; text-align:left; }
.pods { display:flex; flex-wrap:wrap; gap:4px; }
.pod { border-radius:4px; padding:2px 6px; color:#fff; cursor:pointer; min-width:120px;
  font-size:12px; border:2px solid transparent; }
.pod.sel { border-color:#ffb300; }
.pod.old { opacity:.55; } .pod .name { opacity:.85; font-family: monospace; }
pre { background:#8881; padding:6px; max-height:320px; overflow:auto; white-space:pre-wrap; }
#error { color:var(--bad); font-weight:600; }
</style></head>
<body>
<div id="error" data-testid="error"></div>
<div class="head" id="head"></div>
<div id="notes"></div>
<h2>Pods</h2><div id="grid" data-testid="grid"></div>
<div id="detail" data-testid="detail"></div>
<h2>Timeline</h2><div id="timeline" data-testid="timeline"></div>
<h2>Policies</h2><div id="policies" data-testid="policies"></div>
<h2>Child Jobs and Service</h2><div id="jobs" data-testid="jobs"></div>
<details><summary>The JobSet as submitted (redacted)</summary>
<pre id="submitted" data-testid="submitted"></pre></details>
<script>
"use strict";
const REFRESH = __REFRESH__ * 1000;
let selected = null, last = null, timer = null;
function el(tag, attrs, ...kids) {
  const node = document.createElement(tag);
  for (const [k, v] of Object.entries(attrs || {})) {
    if (k === "class") node.className = v; else node.setAttribute(k, v);
  }
  for (const kid of kids) {
    if (kid === null || kid === undefined) continue;
    node.append(kid instanceof Node ? kid : document.createTextNode(String(kid)));
  }
  return node;
}
function fill(id, ...kids) { const n = document.getElementById(id); n.replaceChildren(...kids); }
function podBox(p, attempt) {
  const bits = [p.index === null ? "" : "#" + p.index, p.phase, p.ready ? "ready" : "",
    p.exitCode === null ? "" : "exit " + p.exitCode, p.reason];
  const box = el("div", {class: "pod " + p.phase + (p.attempt < attempt ? " old" : "") +
      (selected === p.name ? " sel" : ""), "data-pod": p.name, "data-phase": p.phase,
      title: p.name},
    el("div", {}, bits.filter(Boolean).join(" · ")),
    el("div", {class: "name"}, p.name),
    el("div", {}, "attempt " + p.attempt + (p.node ? " · " + p.node : "") +
      (p.zone ? " · " + p.zone : "") + (p.slice ? " · slice " + p.slice : "")));
  box.onclick = () => { selected = p.name; render(last); };
  return box;
}
function render(data) {
  last = data;
  if (!data.found) { fill("head", el("span", {class: "muted"}, data.message)); return; }
  const v = data.picture, js = v.jobset;
  fill("head", el("b", {}, js.namespace + "/" + js.name),
    el("span", {class: "badge " + js.state, "data-testid": "state"}, js.state),
    el("span", {}, js.backend + " backend"),
    el("span", {"data-testid": "restarts"}, "restarts: " + js.restarts),
    el("span", {}, js.pods + " pods"),
    el("span", {class: "muted"}, "read " + new Date().toLocaleTimeString()));
  fill("notes", ...v.notes.map(n => el("div", {class: "note"}, n)));
  const rows = [el("tr", {}, el("th", {}, "replicated job"), el("th", {}, "job"),
    el("th", {}, "pods"))];
  let attempt = 0;
  for (const rj of v.grid) for (const job of rj.jobs) for (const p of job.pods)
    attempt = Math.max(attempt, p.attempt);
  const all = {};
  for (const rj of v.grid) for (const job of rj.jobs) {
    for (const p of job.pods) all[p.name] = p;
    rows.push(el("tr", {"data-cell": rj.name + "/" + job.index}, el("td", {}, rj.name),
      el("td", {}, job.index),
      el("td", {}, job.pods.length ? el("div", {class: "pods"},
        ...job.pods.map(p => podBox(p, attempt))) : el("span", {class: "muted"}, "no pod"))));
  }
  fill("grid", el("table", {}, ...rows));
  const p = all[selected];
  fill("detail", p ? el("div", {},
    el("h2", {}, "Pod " + p.name),
    el("div", {}, "phase " + p.phase + ", container restarts " + p.containerRestarts +
      (p.started ? ", started " + p.started : "")),
    p.terminationMessage ? el("div", {}, "termination message:") : null,
    p.terminationMessage ? el("pre", {}, p.terminationMessage) : null,
    el("div", {}, "log (last lines):"),
    el("pre", {"data-testid": "log"}, p.log === null ? "(no log read)" : p.log || "(empty)"))
    : el("div", {class: "muted"}, "select a pod for its log and termination message"));
  const trows = [el("tr", {}, el("th", {}, "time"), el("th", {}, "what"), el("th", {}, "detail"),
    el("th", {}, "failed Job"), el("th", {}, "decided by"))];
  for (const e of v.timeline) trows.push(el("tr", {"data-kind": e.kind}, el("td", {}, e.time),
    el("td", {}, e.kind), el("td", {}, e.text), el("td", {}, e.failedJob || ""),
    el("td", {}, e.decidedBy || "")));
  fill("timeline", el("table", {}, ...trows));
  const s = v.policies.success, f = v.policies.failure;
  fill("policies", el("table", {},
    el("tr", {}, el("th", {}, "success"), el("td", {}, JSON.stringify(s.asWritten)),
      el("td", {}, "succeeded " + JSON.stringify(s.succeeded) + " of " +
        JSON.stringify(s.replicas) + (s.met ? ": met" : ": not met"))),
    el("tr", {}, el("th", {}, "failure"), el("td", {}, JSON.stringify(f.asWritten)),
      el("td", {}, "restarts " + f.restarts + " (" + f.restartsCountTowardsMax +
        " towards maxRestarts " + f.maxRestarts + ")"))));
  const o = v.objects || {jobs: []};
  const jrows = [el("tr", {}, el("th", {}, "Job"), el("th", {}, "replicated job"),
    el("th", {}, "index"), el("th", {}, "attempt"), el("th", {}, "state"),
    el("th", {}, "active · ready · succeeded · failed"), el("th", {}, "why"))];
  for (const j of o.jobs) jrows.push(el("tr", {"data-job": j.name}, el("td", {}, j.name),
    el("td", {}, j.replicatedJob), el("td", {}, j.index), el("td", {}, j.attempt),
    el("td", {}, el("span", {class: "badge " + j.state}, j.state)),
    el("td", {}, [j.active, j.ready, j.succeeded, j.failed].join(" · ")), el("td", {}, j.reason)));
  const svc = o.service;
  fill("jobs", el("table", {}, ...jrows), el("div", {"data-testid": "service"}, !svc ? "" :
    svc.exists ? "Service " + svc.name + " (clusterIP " + svc.clusterIP + ", selector " +
      JSON.stringify(svc.selector) + ")" : "Service " + svc.name + ": not there"));
  fill("submitted", o.submitted ? JSON.stringify(o.submitted, null, 2) : "(not read)");
}
async function load() {
  clearTimeout(timer);
  let done = false;
  try {
    const answer = await fetch("api/ti" + location.search, {credentials: "same-origin"});
    const data = await answer.json().catch(() => ({found: false, message: answer.statusText}));
    if (answer.status === 401 || answer.status === 403) {
      fill("error", "you may not see this task instance (" + answer.status + ")");
      done = true;
    } else if (!answer.ok) {
      fill("error", data.message || data.detail || answer.statusText);
    } else {
      fill("error");
      render(data);
      done = data.found && ["Completed", "Failed"].includes(data.picture.jobset.state);
    }
  } catch (err) { fill("error", "cannot reach the API server: " + err); }
  document.body.dataset.loaded = "1";
  if (!done) timer = setTimeout(load, REFRESH);
}
load();
</script></body></html>
""".replace("__REFRESH__", str(REFRESH_SECONDS))

#: The DAG run's summary: one row per JobSet task of the run.
RUN_PAGE = """<!doctype html>
<html lang="en"><head><meta charset="utf-8"><title>JobSets of the run</title>
<style>
:root { color-scheme: light dark; font: 14px/1.4 system-ui, sans-serif; }
body { margin: 12px; } table { border-collapse:collapse; }
td,th { border:1px solid #8884; padding:3px 6px; text-align:left; vertical-align:top; }
.badge { padding:1px 8px; border-radius:10px; color:#fff; font-weight:600; }
.Completed { background:#2e7d32; } .Failed { background:#c62828; } .Running { background:#1565c0; }
.Pending,.Suspended { background:#8d6e63; } #error { color:#c62828; font-weight:600; }
.muted { opacity:.7; }
</style></head><body>
<div id="error" data-testid="error"></div>
<table id="tasks" data-testid="tasks"></table>
<script>
"use strict";
function el(tag, attrs, ...kids) {
  const node = document.createElement(tag);
  for (const [k, v] of Object.entries(attrs || {})) {
    if (k === "class") node.className = v; else node.setAttribute(k, v);
  }
  for (const kid of kids) if (kid !== null && kid !== undefined)
    node.append(kid instanceof Node ? kid : document.createTextNode(String(kid)));
  return node;
}
async function load() {
  let live = false;
  try {
    const answer = await fetch("api/run" + location.search, {credentials: "same-origin"});
    const data = await answer.json().catch(() => ({tasks: [], message: answer.statusText}));
    if (answer.status === 401 || answer.status === 403) {
      document.getElementById("error").textContent =
        "you may not see this DAG run (" + answer.status + ")";
      return;
    }
    if (!answer.ok) { document.getElementById("error").textContent = data.message; return; }
    const rows = [el("tr", {}, el("th", {}, "task"), el("th", {}, "JobSet"), el("th", {}, "state"),
      el("th", {}, "restarts"), el("th", {}, "pods"), el("th", {}, "last"))];
    for (const t of data.tasks) {
      const name = t.task_id + (t.map_index >= 0 ? "[" + t.map_index + "]" : "");
      if (!t.found) { rows.push(el("tr", {"data-task": name}, el("td", {}, name),
        el("td", {colspan: "5", class: "muted"}, t.message))); continue; }
      const s = t.summary, js = s.jobset;
      live = live || !["Completed", "Failed"].includes(js.state);
      rows.push(el("tr", {"data-task": name}, el("td", {}, name),
        el("td", {}, js.namespace + "/" + js.name + " (" + js.backend + ")"),
        el("td", {}, el("span", {class: "badge " + js.state}, js.state)),
        el("td", {}, js.restarts),
        el("td", {}, Object.entries(s.phases).map(([k, v]) => v + " " + k).join(", ")),
        el("td", {}, s.last ? s.last.kind + ": " + s.last.text : "")));
    }
    if (!data.tasks.length) rows.push(el("tr", {}, el("td", {colspan: "6", class: "muted"},
      "no task of this run has created a JobSet (yet)")));
    document.getElementById("tasks").replaceChildren(...rows);
    document.getElementById("error").textContent = "";
  } catch (err) {
    document.getElementById("error").textContent = "cannot reach the API server: " + err;
    live = true;
  } finally { document.body.dataset.loaded = "1"; }
  if (live) setTimeout(load, __REFRESH__ * 1000);
}
load();
</script></body></html>
""".replace("__REFRESH__", str(REFRESH_SECONDS))
