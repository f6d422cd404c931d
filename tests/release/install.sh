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
# --8<-- [start:install]
pip install "apache-airflow==$AIRFLOW_VERSION" --constraint "$CONSTRAINTS"
pip install "airflow-provider-jobset[airflow]" --constraint "$CONSTRAINTS"
# --8<-- [end:install]
pip check
