#!/usr/bin/env bash
# Install a built release into a fresh environment the way the Getting started page tells a
# user to (the lines between the markers are included in that page), then list what Airflow
# sees. Run by tests/release/test_release.py.
#
# usage: install.sh VENV WHEEL_DIR AIRFLOW_VERSION CONSTRAINTS
set -euo pipefail
venv=$1
export PIP_FIND_LINKS=$2            # the built wheel: the only place our package comes from
AIRFLOW_VERSION=$3
CONSTRAINTS=$4
python3 -m venv "$venv"
# shellcheck disable=SC1091
source "$venv/bin/activate"
export PIP_DISABLE_PIP_VERSION_CHECK=1 PIP_PROGRESS_BAR=off
# No byte-compiling of every installed module (some 8,000 files with Airflow's dependencies): the DAG run below
# compiles the few it imports. It changes nothing a user types (outside the markers).
export PIP_NO_COMPILE=1
# --8<-- [start:install]
pip install "apache-airflow==$AIRFLOW_VERSION" --constraint "$CONSTRAINTS"
pip install "apache-airflow==$AIRFLOW_VERSION" "airflow-provider-jobset[airflow]"
# --8<-- [end:install]
pip check
# What the second step moved away from Airflow's constraints (the test allows only the pins
# our ranges need), as "name==constrained==installed" lines.
pip freeze --all | python3 -c '
import re, sys
pins = {}
for line in open(sys.argv[1]):
    m = re.match(r"([A-Za-z0-9_.-]+)==(\S+)", line)
    if m:
        pins[m[1].lower().replace("_", "-")] = m[2]
for line in sys.stdin:
    name, _, version = line.strip().partition("==")
    key = name.lower().replace("_", "-")
    if key in pins and pins[key] != version:
        print(f"moved: {key}=={pins[key]}=={version}")
' "$CONSTRAINTS"
