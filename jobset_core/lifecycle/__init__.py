"""The one lifecycle of a JobSet run: submit or adopt → wait → finish (and cancel).

:class:`Run` is what every way in uses (the Airflow operator in worker and deferrable mode,
its trigger, the sensor, the KFP step, ``jobsetctl``); :class:`Verdict` is how a wait ends,
:data:`DeletePolicy` what happens to the run then. Adapters only map a verdict (or the
:class:`~jobset_core.errors.RunEnded` error it stands for) to their framework.

Importing this package imports no API client.
"""

from __future__ import annotations

from jobset_core.backends._base import BackendChoice, Handle, Submission
from jobset_core.lifecycle._judge import Judge, Step, WaitRules
from jobset_core.lifecycle._log_plan import (
    LOG_POD_CHOICES,
    LogLine,
    LogOptions,
    LogTarget,
    check_selector,
)
from jobset_core.lifecycle._logs import LogSink
from jobset_core.lifecycle._run import Finished, ProgressCallback, Run
from jobset_core.lifecycle.verdict import (
    DELETE_POLICIES,
    DeletePolicy,
    Verdict,
    VerdictKind,
    error_for,
    should_delete,
)

__all__ = [
    "DELETE_POLICIES",
    "LOG_POD_CHOICES",
    "BackendChoice",
    "DeletePolicy",
    "Finished",
    "Handle",
    "Judge",
    "LogLine",
    "LogOptions",
    "LogSink",
    "LogTarget",
    "ProgressCallback",
    "Run",
    "Step",
    "Submission",
    "Verdict",
    "VerdictKind",
    "WaitRules",
    "check_selector",
    "error_for",
    "should_delete",
]
