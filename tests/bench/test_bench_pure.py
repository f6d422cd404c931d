"""The benchmark suite's pure parts: statistics, the audit log's arithmetic, hourly
requests, goals, the results file and the docs page (which must be what the committed results
make: no number of it is typed by hand)."""

from __future__ import annotations

import json
import os
import sys
from collections import Counter
from pathlib import Path

import pytest

from benchmarks import audit as A
from benchmarks.costs import hourly
from benchmarks.goals import GOALS, Goal, judge
from benchmarks.profiles import PROFILES
from benchmarks.report import fmt, page, table
from benchmarks.results import Figure, Results, ratio
from benchmarks.stats import percentile

ROOT = Path(__file__).resolve().parents[2]


@pytest.mark.parametrize(
    ("values", "q", "expected"),
    [
        ([], 50, None),
        ([7.0], 95, 7.0),
        ([1.0, 2.0, 3.0, 4.0], 50, 2.5),
        ([1.0, 2.0, 3.0, 4.0, 5.0], 95, 4.8),
        ([5.0, 1.0, 3.0], 100, 5.0),
        ([5.0, 1.0, 3.0], 0, 1.0),
    ],
)
def test_percentile_interpolates_like_numpy(
    values: list[float], q: float, expected: float | None
) -> None:
    found = percentile(values, q)
    assert found == (pytest.approx(expected) if expected is not None else None)


def _line(
    audit_id: str,
    stage: str,
    verb: str,
    *,
    user: str = "u",
    resource: str = "jobsets",
    sub: str | None = None,
    ns: str | None = "n",
    name: str | None = None,
    received: str = "2026-01-01T00:00:00.000000Z",
    stamp: str | None = None,
    code: int = 200,
) -> str:
    ref: dict[str, object] = {"resource": resource, "namespace": ns, "name": name}
    if sub:
        ref["subresource"] = sub
    return json.dumps(
        {
            "auditID": audit_id,
            "stage": stage,
            "verb": verb,
            "user": {"username": user},
            "userAgent": "x/1",
            "objectRef": ref,
            "requestReceivedTimestamp": received,
            "stageTimestamp": stamp or received,
            "responseStatus": {"code": code},
        }
    )


T0 = "2026-01-01T00:00:00.000000Z"
T1 = "2026-01-01T00:00:01.000000Z"
T2 = "2026-01-01T00:00:02.000000Z"
T3 = "2026-01-01T00:00:03.000000Z"


def test_audit_lines_parse_and_received_stage_is_left_out() -> None:
    entry = A.parse(
        _line("a", "ResponseComplete", "patch", resource="jobs", sub="status", name="j")
    )
    assert entry is not None
    assert (entry.verb, entry.resource, entry.name, entry.code) == (
        "patch",
        "jobs/status",
        "j",
        200,
    )
    assert A.parse(_line("a", "RequestReceived", "get")) is None
    assert A.parse("not json") is None
    panic = A.parse(_line("p", "Panic", "watch"))
    assert panic is not None and panic.stage == "ResponseComplete"


def test_a_watch_counts_once_and_is_open_between_its_stages() -> None:
    lines = [
        _line("w", "ResponseStarted", "watch", received=T0),
        _line("w", "ResponseComplete", "watch", received=T0, stamp=T2),
        _line("l", "ResponseComplete", "list", received=T1),
        _line("o", "ResponseComplete", "get", user="other", received=T1),
    ]
    entries = [e for e in map(A.parse, lines) if e is not None]
    start = entries[0].received
    counts = A.requests_of(entries, "u", start, start + 10)
    assert counts == Counter({("watch", "jobsets"): 1, ("list", "jobsets"): 1})
    assert A.requests_of(entries, "u", start + 0.5, start + 10) == Counter({("list", "jobsets"): 1})
    assert A.open_watches(entries, "u", start + 1) == Counter({"jobsets": 1})
    assert A.open_watches(entries, "u", start + 3) == Counter()


def test_the_deciding_write_is_the_last_status_write_received_before_the_sighting() -> None:
    lines = [
        _line("1", "ResponseComplete", "patch", sub="status", name="js", received=T0),
        _line("2", "ResponseComplete", "update", sub="status", name="js", received=T1),
        _line("3", "ResponseComplete", "patch", sub="status", name="js", received=T3),
        _line("4", "ResponseComplete", "patch", sub="status", name="js", received=T2, code=409),
        _line("5", "ResponseComplete", "patch", name="js", received=T2),  # not the status
    ]
    writes = A.Writes(e for e in map(A.parse, lines) if e is not None)
    assert len(writes) == 3
    t0 = A.parse(lines[0]).received  # type: ignore[union-attr]
    assert writes.decisive("jobsets", "n", "js", t0 + 2.5) == t0 + 1
    assert writes.decisive("jobsets", "n", "js", t0 - 1) is None
    assert writes.decisive("jobsets", "n", "other", t0 + 9) is None
    entry = writes.decisive_entry("jobsets", "n", "js", t0 + 2.5)
    assert entry is not None and entry.audit_id == "2" and entry.verb == "update"


def test_hourly_requests_reopen_each_watch_at_its_production_window() -> None:
    counts = Counter({("watch", "jobsets"): 4, ("list", "jobsets"): 1, ("get", "jobs"): 2})
    streams = {"jobsets": 1, "events": 2}
    found = hourly(counts, 60.0, streams, {"events": 120.0, "*": 600.0})
    assert found.measured == pytest.approx(7 * 60)
    assert found.polls == pytest.approx(3 * 60)
    assert found.production == pytest.approx(3 * 60 + 1 * 6 + 2 * 30)
    as_measured = hourly(counts, 60.0, streams, None)
    assert as_measured.production == as_measured.measured


def _figure(name: str, ours: float | None, anchor: float | None = 1.0, **params: object) -> Figure:
    return Figure.of(name, "x", ours, anchor, **params)


def test_goals_report_met_missed_by_how_much_and_unmeasured() -> None:
    goals = [
        Goal("abs", lambda f: f.figure.startswith("a:"), 50.0),
        Goal("rel", lambda f: f.figure.startswith("r:"), 1.0, relative=True),
        Goal("floor", lambda f: f.figure.startswith("f:"), 1.25, relative=True, to="floor"),
    ]
    figures = [
        _figure("a: fast", 20.0),
        _figure("a: slow", 75.0),
        _figure("a: none", None),
        _figure("r: faster", 2.0, 4.0),
        _figure("r: slower", 6.0, 4.0),
        _figure("b: other", 1e9),
        _figure("f: near", 1.2, 9.0, floor=1.0),
        _figure("f: far", 2.5, 9.0, floor=1.0),
        _figure("f: no floor", 2.5, 9.0),
    ]
    judged = [(j.goal.name, j.figure.figure, j.met, round(j.by, 3)) for j in judge(figures, goals)]
    assert judged == [
        ("abs", "a: fast", True, 0.0),
        ("abs", "a: slow", False, 0.5),
        ("abs", "a: none", None, 0.0),
        ("rel", "r: faster", True, 0.0),
        ("rel", "r: slower", False, 0.5),
        ("floor", "f: near", True, 0.0),
        ("floor", "f: far", False, 1.0),
        ("floor", "f: no floor", None, 0.0),
    ]


def test_the_issues_goals_bound_the_figures_they_name() -> None:
    names = [
        "scale: detection p95, 100 ending in the same second (1 ns, cluster-wide identity)",
        "scale: most watches of one kind in one namespace (10 ns, per-namespace identity)",
        "scale: API requests per waiting task-hour (1 ns, JobSetSensor fleet)",
        "scale: RSS per waiting task (100 ns, cluster-wide identity)",
        "native: fan-out, submit → all 1000 child Jobs exist",
        "local: jobsetctl validate, process start to answer (p50)",
        "queue: API requests per waiting task-hour (10 ns, cluster-wide identity)",
        "queue: admission → task log p95 (10 ns, per-namespace identity)",
        "detection: p95, deferrable (native)",
        "scale: TCP connections open (100 ns, per-namespace identity)",
        "scale: API requests at start, per task (100 ns, per-namespace identity)",
        "scale: time until every trigger runs (100 ns, JobSetSensor fleet)",
        "local: operator built from a YAML text at DAG parse (parsed before)",
        "view: first contentful paint (1000 pods)",
        "view: time to content (1000 pods)",
        "view: API-server CPU per refresh (1000 pods)",
    ]
    figures = [_figure(n, 0.1, floor=0.1, tasks_per_namespace=1000, pods=1000) for n in names]
    sparse = _figure(names[2].replace("1 ns", "100 ns"), 5.0, tasks_per_namespace=10)
    small = _figure("view: API-server CPU per refresh (4 pods)", 900.0, pods=4)
    judged = judge([*figures, sparse, small])
    # one goal each, in the goals' order; sparse layouts and small views unbounded
    assert sorted(j.figure.figure for j in judged) == sorted(names)
    assert all(j.met for j in judged)
    assert len(GOALS) == len(names)


def test_results_round_trip_with_the_documented_keys(tmp_path: Path) -> None:
    results = Results(profile="smoke", machine={"before": {"loadavg": [1.0, 1.0, 1.0]}})
    results.add([_figure("a: b", 2.0, 4.0, floor=1.0, anchor_name="A", nan=float("nan"))])
    path = tmp_path / "r.json"
    results.write(path)
    data = json.loads(path.read_text())
    assert list(data["figures"][0]) == [
        "figure",
        "unit",
        "ours",
        "anchor",
        "ratio",
        "floor",
        "n",
        "params",
    ]
    assert data["figures"][0]["ratio"] == 0.5
    assert data["figures"][0]["params"]["nan"] is None
    back = Results.read(path)
    assert back.figures[0].ratio == 0.5 and back.machine == results.machine
    assert ratio(1.0, 0.0) is None and ratio(None, 2.0) is None


@pytest.mark.parametrize(
    ("value", "unit", "text"),
    [
        (None, "", "\u2013"),
        (12345.6, "ms", "12,346 ms"),
        (123.4, "", "123"),
        (12.34, "", "12.3"),
        (1.234, "s", "1.23 s"),
        (0.01234, "", "0.0123"),
        (0.0, "", "0.00"),
    ],
)
def test_numbers_are_formatted_to_three_digits(value: float | None, unit: str, text: str) -> None:
    assert fmt(value, unit) == text


def test_profile_overrides_parse_by_field_type() -> None:
    smoke = PROFILES["smoke"].with_overrides(["tasks=9", "layouts=1,10", "window=2.5"])
    assert (smoke.tasks, smoke.layouts, smoke.window) == (9, (1, 10), 2.5)
    with pytest.raises(ValueError, match="unknown profile field"):
        PROFILES["smoke"].with_overrides(["nope=1"])


def test_the_committed_page_is_what_the_committed_results_make() -> None:
    results = Results.read(ROOT / "benchmarks/results/latest.json")
    committed = (ROOT / "docs/benchmarks.md").read_text(encoding="utf-8")
    assert committed == page(results), "run `make bench` (or `python -m benchmarks report`)"
    assert results.profile == "full"
    assert table(results).count("\n") == len(results.figures)


@pytest.mark.parametrize(
    ("resource", "owners", "expected"),
    [
        ("jobs", [("ConfigMap", "anchor")], True),  # a native run's Job: its anchor owns it
        ("jobs", [("JobSet", "js")], False),  # the controller's
        ("jobs", [], False),  # a Job of nobody's (the anchors' KubernetesJobTrigger)
        ("pods", [("ConfigMap", "anchor")], False),  # only Jobs end a native run
    ],
)
def test_the_floor_records_only_a_native_runs_jobs(
    resource: str, owners: list[tuple[str, str]], expected: bool
) -> None:
    from kubernetes.client import V1Job, V1ObjectMeta, V1OwnerReference

    from benchmarks import floor

    refs = [V1OwnerReference(api_version="v1", kind=k, name=n, uid="u") for k, n in owners]
    job = V1Job(metadata=V1ObjectMeta(name="j", namespace="n", owner_references=refs or None))
    assert floor.native_job(resource, job) is expected


def test_process_starts_are_timed_in_rounds_of_every_subject(tmp_path: Path) -> None:
    """Each round starts every subject once, so a slow spell falls on them alike; the
    untimed first start of each is not counted."""
    from benchmarks.local import _Started, _time_starts

    log = tmp_path / "starts"

    def subject(name: str) -> _Started:
        code = f"open({str(log)!r}, 'a').write({name!r})"
        return _Started([sys.executable, "-c", code], dict(os.environ))

    subjects = [subject("a"), subject("b"), subject("c")]
    _time_starts(subjects, 3)
    assert log.read_text() == "abc" + "abc" * 3
    assert [(len(s.wall), len(s.cpu)) for s in subjects] == [(3, 3)] * 3
    assert all(w > 0 for s in subjects for w in s.wall)
    failing = _Started([sys.executable, "-c", "raise SystemExit(3)"], dict(os.environ))
    with pytest.raises(RuntimeError, match="failed"):
        _time_starts([failing], 1)
