#!/usr/bin/env bash
# Re-resolve one side's lock file, requirements/<side>.txt, from pyproject.toml (run by hand
# when a dependency range changes; the environments are built from the committed locks by
# scripts/venv.sh and never resolve anything themselves).
#
#   scripts/lock.sh airflow        the main Airflow side (newest Airflow 3, lint and test tools)
#   scripts/lock.sh kfp            the KFP side (kfp pins kubernetes<31; kubernetes_asyncio held
#                                  at the core's floor: requirements/kfp-floor.in)
#   scripts/lock.sh docs           the docs site, the benchmarks' charts and the release build
#   scripts/lock.sh airflow-3.N    the matrix side of one older Airflow 3 minor: its newest
#                                  patch, with PyPI as it was on that patch's release day
#   scripts/lock.sh core-floor     the core alone at the LOWEST version of each of its runtime
#                                  dependencies (and of the test tools), on the lowest Python (3.11)
#   scripts/lock.sh core-ceiling   the core alone at the HIGHEST versions its ranges admit (always
#                                  re-resolved to the newest), on the newest Pythons
#   scripts/lock.sh constraints    requirements/constraints/airflow-<v>-py<py>.txt (see below)
#
# uv keeps the versions already in the output file where they still satisfy the inputs, so a
# re-lock moves only what must move. Delete the file first to take the newest of everything.
set -euo pipefail
side=${1:?usage: scripts/lock.sh airflow|kfp|docs|core-floor|core-ceiling|airflow-3.N|constraints}
root=$(cd "$(dirname "$0")/.." && pwd)
cd "$root"
uv=${XDG_CACHE_HOME:-$HOME/.cache}/airflow-provider-jobset/uv-0.13.8/bin/uv
[ -x "$uv" ] || { scripts/venv.sh docs >/dev/null; }
export UV_CACHE_DIR=${XDG_CACHE_HOME:-$HOME/.cache}/airflow-provider-jobset/uv-cache
# The Python a lock is resolved for: the first one requirements/pythons.txt lists for the side
# (scripts/venv.sh builds it with that one), else the machine's 3.11.
py=$(awk -v side="$side" '$1 == side { print $2 }' requirements/pythons.txt)
py=${py:-3.11}
compile() { "$uv" pip compile -q --no-header --python-version "$py" "$@"; }
# Packages our ranges need newer than an older Airflow's release day (see airflow-3.N).
NEWER_THAN_RELEASE="apache-airflow-providers-common-compat"

# release VERSION|MINOR: the newest final apache-airflow release matching it and the time an
# hour after its last upload, from PyPI's simple index (PEP 691 JSON carries upload times).
release() {
  python3 - "$1" <<'PY'
import json, re, sys, urllib.request
from datetime import datetime, timedelta

req = urllib.request.Request(
    "https://pypi.org/simple/apache-airflow/",
    headers={"Accept": "application/vnd.pypi.simple.v1+json"},
)
files = json.load(urllib.request.urlopen(req, timeout=60))["files"]
uploads = {}
for f in files:
    m = re.fullmatch(r"apache_airflow-(\d+\.\d+\.\d+)(?:-py3-none-any\.whl|\.tar\.gz)", f["filename"])
    if m and (m[1] == sys.argv[1] or m[1].startswith(sys.argv[1] + ".")):
        at = datetime.fromisoformat(f["upload-time"].replace("Z", "+00:00"))
        uploads[m[1]] = max(uploads.get(m[1], at), at)
version = max(uploads, key=lambda v: tuple(int(x) for x in v.split(".")))
print(version, (uploads[version] + timedelta(hours=1)).strftime("%Y-%m-%dT%H:%M:%SZ"))
PY
}

case $side in
  airflow) compile pyproject.toml --extra airflow --extra openlineage --extra test --extra lint \
             -o requirements/airflow.txt ;;
  kfp) compile pyproject.toml --extra kfp --extra test --extra lint \
         -c requirements/kfp-floor.in -o requirements/kfp.txt ;;
  # The two ends of every range pyproject.toml declares, for tests/release/test_ranges.py (it
  # installs the built wheel with one of these into a bare environment of that Python).
  core-floor)
    compile pyproject.toml --extra test --resolution lowest-direct -o requirements/core-floor.txt ;;
  core-ceiling)  # also installed on the other Pythons listed: nothing here differs on them
    compile pyproject.toml --extra test --upgrade -o requirements/core-ceiling.txt ;;
  docs) compile pyproject.toml --extra docs --extra bench --extra release --extra test -o requirements/docs.txt ;;
  airflow-3.*)
    # The newest patch of the minor, with everything else as Airflow's constraints for that
    # patch would have it: the highest versions uploaded before its release (plus an hour).
    # Packages whose range in pyproject.toml needs something newer than that day are let
    # through (a user installing this package gets them the same way).
    minor=${side#airflow-}
    read -r version released < <(release "$minor")
    pin=$(mktemp)
    trap 'rm -f "$pin"' EXIT
    echo "apache-airflow==$version" > "$pin"
    now=$(date -u +%Y-%m-%dT%H:%M:%SZ)
    newer=()
    for pkg in $NEWER_THAN_RELEASE; do newer+=(--exclude-newer-package "$pkg=$now"); done
    compile pyproject.toml "$pin" --extra airflow --extra openlineage --extra test \
      --exclude-newer "$released" "${newer[@]}" -o "requirements/$side.txt"
    # The pin's temporary file name is not an input anyone can see: name it for what it is.
    sed -i "s|-r $pin|the matrix pin apache-airflow==$version (PyPI as of $released)|" \
      "requirements/$side.txt"
    ;;
  constraints)
    # Airflow publishes a constraints file per release (its "constraints-X.Y.Z" tag), made by
    # resolving Airflow and its providers to the highest versions on PyPI on the release day.
    # That file is not reachable from here, so this rebuilds one the same way from PyPI alone:
    # Airflow as locked on the airflow side, the providers we need, resolved to the highest
    # versions uploaded before that Airflow release. tests/release/ installs the wheel against
    # it; JOBSET_AIRFLOW_CONSTRAINTS points the test at Airflow's own file instead.
    version=$(sed -n 's/^apache-airflow==//p' requirements/airflow.txt)
    read -r version released < <(release "$version")
    out=requirements/constraints/airflow-$version-py$py.txt
    mkdir -p requirements/constraints
    spec=$(mktemp)
    trap 'rm -f "$spec"' EXIT
    echo "apache-airflow[cncf.kubernetes,common.compat,standard]==$version" > "$spec"
    {
      echo "# Constraints for apache-airflow==$version on Python $py, rebuilt from PyPI by"
      echo "# scripts/lock.sh constraints: the highest versions uploaded before $released"
      echo "# (an hour after Airflow's release upload), as Airflow's own constraints-$version file"
      echo "# is made."
      echo "# Not Airflow's published file: that one is not reachable from the build machines."
      compile --no-annotate --exclude-newer "$released" "$spec"
    } > "$out"
    echo "wrote $out"
    ;;
  *) echo "unknown side: $side" >&2; exit 2 ;;
esac
