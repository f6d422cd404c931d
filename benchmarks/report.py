"""The results as a console table and as the docs page ``docs/benchmarks.md`` (pure).

The page is generated from the results file and nothing else (``make bench`` writes it; a
test checks that the committed page is what the committed results make): no number in it is
typed by hand. Goals (:mod:`benchmarks.goals`) are judged here, never asserted in tests. This
module imports nothing but the standard library and the suite's pure modules, so the docs
environment can run it.
"""

from __future__ import annotations

from collections.abc import Iterable

from benchmarks.goals import Judged, judge
from benchmarks.results import Figure, Results

DASH = "\u2013"
TIMES = "\u00d7"

__all__ = ["FAMILY_TITLES", "METHODS", "chart_uri", "families", "fmt", "page", "table"]

FAMILY_TITLES = {
    "detection": "Detection latency",
    "scale": "Scale in one triggerer",
    "pods": "Pod and Event watches of a big JobSet",
    "native": "Native backend",
    "local": "CLI, validation and import",
    "queue": "Kueue queues in one triggerer",
    "checks": "Server checks before a submit",
    "view": "The JobSet tab in the Airflow UI",
}


def fmt(value: float | None, unit: str = "") -> str:
    """A number for a table: 3 significant digits, thousands apart; a dash for none."""
    if value is None:
        return DASH
    magnitude = abs(value)
    if magnitude >= 1000:
        text = f"{value:,.0f}"
    elif magnitude >= 100:
        text = f"{value:.0f}"
    elif magnitude >= 10:
        text = f"{value:.1f}"
    elif magnitude >= 1 or magnitude == 0:
        text = f"{value:.2f}"
    else:
        text = f"{value:.3g}"
    return f"{text} {unit}".strip()


def _ratio(figure: Figure) -> str:
    return DASH if figure.ratio is None else f"{figure.ratio:.3g}{TIMES}"


def _other(figure: Figure) -> str:
    other = figure.params.get("other_anchor") or {}
    return ", ".join(f"{fmt(v)}" for v in other.values()) or DASH


def table(results: Results) -> str:
    """Every figure, one line each (for the console)."""
    rows = [("figure", "unit", "ours", "anchor", "other anchor", "ratio", "floor", "n")]
    for f in results.figures:
        rows.append(
            (
                f.figure,
                f.unit,
                fmt(f.ours),
                fmt(f.anchor),
                _other(f),
                _ratio(f),
                fmt(f.floor),
                str(f.n),
            )
        )
    widths = [max(len(r[i]) for r in rows) for i in range(len(rows[0]))]
    lines = ["  ".join(c.ljust(w) for c, w in zip(r, widths, strict=True)) for r in rows]
    return "\n".join(lines)


def chart_uri(family: str) -> str:
    """Where the site has a family's chart, relative to ``docs/`` and to the page: an SVG the
    docs build (``scripts/docs_gen.py``) draws from the committed results file with
    :mod:`benchmarks.charts`."""
    return f"benchmarks/{family}.svg"


def families(figures: Iterable[Figure]) -> dict[str, list[Figure]]:
    """The figures by family, in the order they first appear."""
    found: dict[str, list[Figure]] = {}
    for figure in figures:
        found.setdefault(figure.family, []).append(figure)
    return found


#: How each family is measured (prose only: every number of the page comes from the JSON).
METHODS = {
    "detection": (
        "From the status write that ended a run (its arrival at the API server, from the "
        "audit log) to the moment its waiter answered. Every way in runs one run per round "
        "on each backend, side by side with the anchors on a Job and on a pod, all ending in "
        "the same second; the first round warms up and is not counted. The floor is an "
        "independent raw watch (the official `kubernetes` client) of the same objects; for the "
        "poking sensor on the native backend, whose answer carries the write that records "
        "the run's end on its anchor (its process may exit right after the poke), the floor "
        "is that raw watch and one write of its own made the moment it saw the Job end. The "
        "deferrable ways run their trigger in the process that deferred, to its end as a "
        "triggerer does (timed at its event), so no event is held; the worker is timed when "
        "the core's wait gives its verdict, the poking sensor when its poke answers. In a "
        "real triggerer an event that comes within `[workers] min_heartbeat_interval` + "
        "2 s of the deferral waits out the rest (see the trigger's `ResumeGuard` in the "
        "Airflow guide), and these runs end 6-7 s after their submission."
    ),
    "scale": (
        "One process per subject, each a triggerer's event loop holding one trigger per "
        "waiting task, as the triggerer runs them: ours for an identity that may list across "
        "namespaces (cluster-wide informers), ours for an identity bound by a Role in each "
        "namespace only (per-namespace informers), the `JobSetSensor` fleet, and the anchors "
        "on each run's child Job and pod. They start one after the other, each once every "
        "trigger of the one before runs: a trigger of ours runs once the shared observer "
        "holds its run, every informer has its watch open and the trigger has judged its run "
        "(its first log line); an anchor's once it has sent its first request. "
        "Requests and watches are counted at the API server "
        "(audit log) over a steady window; connections, RSS and CPU are read from `/proc` "
        "outside the process; event-loop lag is a ticker in the loop. Then a burst of runs "
        "ends in the same second and each subject's detection is timed from the status "
        "write that ended each run. Hourly requests count each open watch reopened at its "
        "production window (the bench shortens the windows so that at least two server-side "
        "watch timeouts fall in the measuring window; see `params.streams`)."
    ),
    "pods": (
        "A JobSet of many pods and, beside it, a batch Job of as many pods, started together "
        "and ended in the same second. Ours waits for the JobSet with the whole observer "
        "(JobSet, Jobs, pods, Warning Events) and again without the pod and Event informers "
        "(`lean`): the difference is what those watches cost. The anchor waits for the Job; "
        "the floor receives the same streams with raw watches and keeps nothing."
    ),
    "native": (
        "Fan-out: from the waiter's submission to the moment a raw watch of the namespace "
        "has seen every child Job, the native backend (it creates them itself) against the "
        "upstream controller, the same JobSet. Reconcile requests: every request of the "
        "native waiter but its watches and lists, against every request of the JobSet "
        "controller about the run's namespace (both from the audit log), over a run's life "
        "and per hour while it runs with nothing happening."
    ),
    "queue": (
        "The bench devcluster runs Kueue (v0.17) for this family; the other families' JobSets "
        "carry no queue label, so Kueue's webhooks never see them and its manager leaves them "
        "alone. A ClusterQueue whose quota a blocker JobSet holds, and queued JobSets (one pod "
        "requesting one CPU each) in a LocalQueue of each of their namespaces: Kueue keeps "
        "every one queued for quota that is only in use now (a request above the maximum would "
        "be refused at once). One process per identity holds a `JobSetTrigger` per queued task "
        "(as `JobSetOperator(deferrable=True, queue=...)` defers), for an identity that may "
        "list and read Workloads across namespaces (one Workload informer) and for one bound in "
        "each namespace only (one per namespace). The anchor is the same process over as many "
        "waiting tasks without a queue (a pod running each, as in the scale family): ours / "
        "anchor is what queue awareness costs a waiting task. Requests, watches, connections, "
        "RSS and CPU are measured over a steady window as the scale family does. Then the "
        "ClusterQueue's quota grows at once and Kueue admits some of the queued runs; each is "
        "timed from the status write that admitted its Workload (audit log) to the trigger's "
        "progress line `admitted` (the task log's line). No `cncf.kubernetes` trigger reads "
        "Kueue: the admission figures' anchor is the floor, an independent raw watch of "
        "Workloads (official client)."
    ),
    "checks": (
        "What the server checks add to a submit: the dry runs of a JobSet of two replicated "
        "jobs (the run object, a child Job and a pod a replicated job, and the native Service, "
        "all at once; never one a replica), timed in this process through the lifecycle, against "
        "the same submit without the checks (the run object's create, and for the native "
        "backend its first pass, which creates the Service and every child Job). Requests are "
        "the client's own count; the first submit of each backend warms up and is not counted."
    ),
    "view": (
        "A real Airflow (API server, DAG processor, scheduler, triggerer) runs one deferrable "
        "`JobSetOperator` whose JobSet's pods (Jobs of 8) keep running while it is measured. "
        "Debian's Chromium (headless) loads the task try's JobSet page (what the JobSet tab "
        "frames) and the Airflow UI's page of the task instance (its log), alternating, after "
        "one untimed load of each: the first contentful paint, and the time until the page "
        "shows what it is for (every pod in the grid; the try's log lines), both from the "
        "navigation's start. The API server's CPU (its process group, from `/proc`) per "
        "refresh of each page's data: the view's answer built afresh (3.2 s apart, past the "
        "answer shared for 3 s) against the log as the UI reads it (`application/x-ndjson`)."
    ),
    "local": (
        "`jobsetctl validate FILE` as a process, against `kubectl create --dry-run=server` "
        "(the API server's and the webhook's checks) and the interpreter's bare start; "
        "validation in-process against a server-side dry run; the import a DAG file pays "
        "over `airflow.sdk`, against `KubernetesJobOperator`'s module (fresh interpreters, "
        "alternating); an operator built from a YAML text at DAG parse."
    ),
}


def _cell(text: str) -> str:
    return text.replace("|", "\\|").replace("\n", " ")


def _names(figures: list[Figure]) -> list[str]:
    lines = []
    for key, label in (
        ("anchor_name", "anchor"),
        ("other_anchor", "other anchor"),
        ("floor_name", "floor"),
    ):
        names = []
        for figure in figures:
            value = figure.params.get(key)
            for name in value if isinstance(value, dict) else [value] if value else []:
                if name not in names:
                    names.append(name)
        if names:
            lines.append(f"*{label}*: " + "; ".join(f"{n}" for n in names))
    return lines


def _goal_rows(judged: list[Judged]) -> list[str]:
    rows = [
        "| goal | figure | value | bound | result | floor |",
        "|---|---|---|---|---|---|",
    ]
    for j in judged:
        unit = TIMES if j.goal.relative else j.figure.unit
        if j.met is None:
            result = "not measured in this run"
        elif j.met:
            result = "met"
        else:
            result = f"**missed** by {j.by * 100:.0f} %"
        rows.append(
            f"| {_cell(j.goal.name)} | {_cell(j.figure.figure)} | {fmt(j.value, unit)} "
            f"| {fmt(j.goal.bound, unit)} | {result} | {fmt(j.figure.floor)} |"
        )
    return rows


def _why(judged: list[Judged]) -> list[str]:
    missed: dict[str, list[Judged]] = {}
    for j in judged:
        if j.met is False:
            missed.setdefault(j.goal.name, []).append(j)
    lines = []
    for name, found in missed.items():
        worst = max(found, key=lambda j: j.by)
        reason = worst.goal.why_missed or "not explained yet"
        unit = TIMES if worst.goal.relative else worst.figure.unit
        lines.append(
            f"* **{_cell(name)}**: missed on {len(found)} figure(s), worst "
            f"{fmt(worst.value, unit)} ({worst.figure.figure}). Why: {reason}."
        )
    return lines


def _load(machine: dict[str, object], when: str) -> str:
    found = machine.get(when)
    if not isinstance(found, dict):
        return DASH
    load = found.get("loadavg") or []
    text = " / ".join(f"{v:.2f}" for v in load) if isinstance(load, list) else DASH
    return f"{text} (at {found.get('at', '?')})"


def page(results: Results) -> str:
    """The docs page (Markdown)."""
    machine = results.machine
    judged = judge(results.figures)
    out = [
        "# Benchmarks",
        "",
        "<!-- Generated by `make bench` from benchmarks/results/latest.json "
        "(`python -m benchmarks report --page docs/benchmarks.md`). Do not edit by hand. -->",
        "",
        "Every figure below was measured in one run of `make bench`, ours side by side with its "
        "anchor (the `cncf.kubernetes` provider's triggers and operator, the upstream JobSet "
        "controller, `kubectl`, each run with its defaults, as its users run it) and, where one "
        "exists, a floor (the same job done by hand). The ratio is ours / anchor: below 1 is "
        "better for every figure but throughput. Nothing here is typed by hand: the page is "
        "rendered from `benchmarks/results/latest.json`.",
        "",
        f"* profile: `{results.profile}`, {len(results.figures)} figures, "
        f"{fmt(_num(machine.get('seconds')), 's')} in all",
        f"* machine: {machine.get('cpus', '?')} CPUs, {machine.get('system', '?')}, "
        f"Python {machine.get('python', '?')}",
        f"* load average (1 / 5 / 15 min) before: {_load(machine, 'before')}; "
        f"after: {_load(machine, 'after')}",
    ]
    out += [f"* {_cell(note)}" for note in results.notes]
    if results.settings:
        shown = ", ".join(
            f"`{k}={_setting(v)}`" for k, v in results.settings.items() if k != "name"
        )
        out.append(f"* settings (`benchmarks/profiles.py`): {shown}")
        out.append(
            "  (`window`: the seconds of steady waiting measured; `watch_window`: the seconds "
            "the bench's observers keep a watch open, shortened from production so that the "
            "window holds several reopenings; `server_min_request_timeout`: the bench API "
            "server's `--min-request-timeout`, so that a watch asking no timeout ends after "
            "that to twice that, not after 30-60 minutes: the window then covers at least two "
            "server-side watch timeouts of every subject)"
        )
    out += ["", "## Goals", ""]
    if judged:
        out += _goal_rows(judged)
        why = _why(judged)
        if why:
            out += ["", "Where a goal is missed, and why:", "", *why]
    else:
        out.append("No figure of this run is bounded by a goal.")
    for family, figures in families(results.figures).items():
        out += ["", f"## {FAMILY_TITLES.get(family, family)}", ""]
        if family in METHODS:
            out += [METHODS[family], ""]
        out += [
            "| figure | unit | ours | anchor | other anchor | ratio | floor | n |",
            "|---|---|---|---|---|---|---|---|",
        ]
        for f in figures:
            name = f.figure.split(": ", 1)[-1]
            out.append(
                f"| {_cell(name)} | {f.unit} | {fmt(f.ours)} | {fmt(f.anchor)} | {_other(f)} "
                f"| {_ratio(f)} | {fmt(f.floor)} | {f.n} |"
            )
        out += ["", *_names(figures)]
        title = FAMILY_TITLES.get(family, family)
        alt = f"{title}: ours against the anchors and the floor, a panel per measure"
        out += ["", f"[![{alt}]({chart_uri(family)})]({chart_uri(family)})"]
    out += [
        "",
        "## Reproduce",
        "",
        "`make bench` (its own devcluster, with an audit log; or the cluster of `KUBECONFIG`, "
        "where requests are counted in each subject's process) measures everything and "
        "rewrites this page, the JSON and the charts. `make bench BENCH_ARGS='--only scale "
        "--set layouts=1,10'` measures part of it. The JSON keeps every figure's parameters "
        "(`params`): sizes, windows, the anchors' names and the raw counts behind each ratio.",
        "",
    ]
    return "\n".join(out)


def _setting(value: object) -> str:
    if isinstance(value, list):
        return ",".join(str(v) for v in value)
    return str(value)


def _num(value: object) -> float | None:
    return float(value) if isinstance(value, (int, float)) else None
