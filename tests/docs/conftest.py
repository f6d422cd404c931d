"""Docs tests import Airflow (the reference's docstring examples): give them a private
``AIRFLOW_HOME`` (never the user's), set before anything imports Airflow."""

from __future__ import annotations

import os

from tests._scratch import scratch_dir

os.environ["AIRFLOW_HOME"] = str(scratch_dir("jobset-docs-airflow-home-"))
os.environ["AIRFLOW__CORE__LOAD_EXAMPLES"] = "False"
