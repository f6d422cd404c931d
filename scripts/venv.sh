#!/usr/bin/env bash
# Prepare one side's Python environment: .venv/<side>, from requirements/<side>.txt.
#
# Sides: airflow (newest Airflow 3, lint tools), kfp (KFP pins kubernetes<31), docs (the docs
# site and the release build), and one per older Airflow 3 minor of the test matrix
# (airflow-3.0, airflow-3.1, airflow-3.2). scripts/lock.sh re-resolves a lock.
#
# The environment is rebuilt only when its inputs change: the lock file of the side,
# pyproject.toml, the Python version and the uv version are hashed into .venv/<side>/.stamp.
# uv's own download/wheel cache lives outside the repo, so a rebuild on a warm machine takes
# seconds. Everything comes from PyPI through the project's own files: nothing installed by
# hand is assumed.
#
# `scripts/venv.sh uv` only bootstraps uv and prints its path (the devcluster's image build
# installs the Python image's packages with it).
#
# `scripts/venv.sh python X.Y` prints the path of the machine's Python X.Y. A side listed in
# requirements/pythons.txt is built with the first Python listed there.
set -euo pipefail
side=${1:?usage: scripts/venv.sh airflow|kfp|docs|airflow-3.N|uv|python X.Y}
root=$(cd "$(dirname "$0")/.." && pwd)
cache=${XDG_CACHE_HOME:-$HOME/.cache}/airflow-provider-jobset
uv_version=0.13.8

# The interpreter of Python X.Y: `pythonX.Y` on PATH if it runs, else one beside python3's
# installation (pyenv keeps its versions side by side, and its shims refuse a version that is
# not selected).
find_python() {
  local want=$1 candidate base
  base=$(python3 -c 'import sys; print(sys.base_prefix)')
  for candidate in "python$want" "$(dirname "$base")"/"$want".*/bin/"python$want"; do
    if [ "$("$candidate" -c 'import sys; print("%d.%d" % sys.version_info[:2])' 2>/dev/null)" = "$want" ]; then
      command -v "$candidate"
      return 0
    fi
  done
  echo "[venv] no Python $want on this machine (on PATH or beside $base): the package claims it" >&2
  return 1
}
if [ "$side" = python ]; then
  find_python "${2:?usage: scripts/venv.sh python X.Y}"
  exit
fi
listed=$(awk -v side="$side" '$1 == side { print $2 }' "$root/requirements/pythons.txt")
if [ -n "$listed" ]; then
  python=$(find_python "$listed")
else
  python=${PYTHON:-python3}
fi
uv_dir=$cache/uv-$uv_version
uv=$uv_dir/bin/uv

if [ ! -x "$uv" ]; then
  echo "[venv] bootstrapping uv $uv_version into $uv_dir" >&2
  rm -rf "$uv_dir"
  "${PYTHON:-python3}" -m venv "$uv_dir"
  "$uv_dir/bin/pip" install -q "uv==$uv_version" >&2
fi
if [ "$side" = uv ]; then
  echo "$uv"
  exit 0
fi

lock=$root/requirements/$side.txt
[ -f "$lock" ] || { echo "[venv] no lock file $lock" >&2; exit 2; }
venv=$root/.venv/$side
pyver=$("$python" -c 'import sys; print("%d.%d.%d" % sys.version_info[:3])')
key=$(cat "$lock" "$root/pyproject.toml" "$0" | sha256sum | cut -c1-16)-py$pyver-uv$uv_version
if [ -f "$venv/.stamp" ] && [ "$(cat "$venv/.stamp")" = "$key" ] && [ -x "$venv/bin/python" ]; then
  exit 0
fi
echo "[venv] building .venv/$side (key $key)"
start=$(date +%s)
# Build beside the old environment and swap at the end (a relocatable venv survives the
# rename), so processes still using the old one are not pulled from under their feet.
tmp=$venv.tmp-$$
rm -rf "$tmp"
trap 'rm -rf "$tmp"' EXIT
"$uv" venv -q --relocatable --python "$python" "$tmp"
export UV_CACHE_DIR=$cache/uv-cache
# Compile bytecode at install time: environments that set PYTHONDONTWRITEBYTECODE would
# otherwise recompile the Kubernetes clients and Airflow in every process (seconds each).
"$uv" pip install -q --compile-bytecode --python "$tmp/bin/python" -r "$lock"
"$uv" pip install -q --python "$tmp/bin/python" --no-deps -e "$root"
echo "$key" > "$tmp/.stamp"
old=$venv.old-$$
[ -e "$venv" ] && mv "$venv" "$old"
mv "$tmp" "$venv"
rm -rf "$old"
echo "[venv] .venv/$side ready in $(( $(date +%s) - start ))s"
