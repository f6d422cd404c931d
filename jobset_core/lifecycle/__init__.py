"""The one lifecycle of a JobSet run, and its one door.

A way in (the Airflow operator, sensor and trigger, the KFP launcher, ``jobsetctl``) builds
one :class:`RunRequest` from its own arguments (checked there with this package's argument
checks), opens a :func:`session` (or :func:`blocking` for a synchronous caller) and calls the
:class:`Lifecycle` it yields: :meth:`~Lifecycle.execute` (start → wait → complete), or the
three steps apart for a deferrable task. :attr:`Lifecycle.runs` finds, looks at, deletes and
reads the logs of runs as they stand. A wait ends in a :class:`Verdict`; :data:`DeletePolicy`
says what happens to the run then. Adapters only map a verdict (or the
:class:`~jobset_core.errors.RunEnded` error it stands for) to their framework.

This is the only part of the core's engine the adapters may import (an import contract says
so). Importing it imports no API client.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from jobset_core.backends import BACKEND_CHOICES, BackendChoice, Handle, Submission
from jobset_core.errors import InvalidArgument
from jobset_core.lifecycle._judge import Judge, Step, WaitRules
from jobset_core.lifecycle._lifecycle import Finished, Lifecycle, Reporter, Started, prepare
from jobset_core.lifecycle._log_plan import (
    LOG_POD_CHOICES,
    LogLine,
    LogOptions,
    LogTarget,
    check_selector,
)
from jobset_core.lifecycle._logs import LogSink
from jobset_core.lifecycle._runs import Runs, Standing
from jobset_core.lifecycle._session import blocking, session
from jobset_core.lifecycle.request import (
    ON_PREEMPTION,
    Deadline,
    InvalidArgumentType,
    Limit,
    OnPreemption,
    OnRestart,
    RunRequest,
    count,
    flag,
    log_options,
    namespace,
    one_of,
    pod_start_rules,
    queue_name,
    seconds,
)
from jobset_core.lifecycle.verdict import (
    DELETE_POLICIES,
    DeletePolicy,
    Verdict,
    VerdictKind,
    error_for,
    should_delete,
)
from jobset_core.policy.pod_start import DEFAULT_GRACE, PodStartRules
from jobset_core.policy.queue import Queue

if TYPE_CHECKING:
    from jobset_core.client.config import (
        ClientSettings,
        default_namespace,
        settings_spelled_as,
    )

__all__ = [
    "BACKEND_CHOICES",
    "DEFAULT_GRACE",
    "DELETE_POLICIES",
    "LOG_POD_CHOICES",
    "ON_PREEMPTION",
    "BackendChoice",
    "ClientSettings",
    "Deadline",
    "DeletePolicy",
    "Finished",
    "Handle",
    "InvalidArgument",
    "InvalidArgumentType",
    "Judge",
    "Lifecycle",
    "Limit",
    "LogLine",
    "LogOptions",
    "LogSink",
    "LogTarget",
    "OnPreemption",
    "OnRestart",
    "PodStartRules",
    "Queue",
    "Reporter",
    "RunRequest",
    "Runs",
    "Standing",
    "Started",
    "Step",
    "Submission",
    "Verdict",
    "VerdictKind",
    "WaitRules",
    "blocking",
    "check_selector",
    "count",
    "default_namespace",
    "error_for",
    "flag",
    "log_options",
    "namespace",
    "one_of",
    "pod_start_rules",
    "prepare",
    "queue_name",
    "seconds",
    "session",
    "settings_spelled_as",
    "should_delete",
]

#: Connection settings, resolved on first use (the settings module reads kubeconfigs).
_LAZY = {"ClientSettings", "default_namespace", "settings_spelled_as"}


def __getattr__(name: str) -> Any:
    if name not in _LAZY:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    from jobset_core.client import config

    return getattr(config, name)
