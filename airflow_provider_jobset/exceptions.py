"""How a JobSet task ends badly: the core's errors, and what Airflow does with each.

The operator raises the core's own error for how the run ended
(:mod:`jobset_core.errors`), so a callback or a retry policy can tell them apart. Errors that
must never be retried are wrapped in an ``AirflowFailException`` (their ``__cause__`` is the
core's error), so that Airflow versions without retry policies fail them too.

===========================  ============================================  ================
error                        when                                          retried?
===========================  ============================================  ================
``JobSetRestarting``         the JobSet restarted: the try ends, the next  yes (at once on
                             try continues with the same JobSet            Airflow 3.3+)
``JobSetPreempted``          its Kueue queue preempted it                  yes (at once on
                             (``on_preemption="retry"``): the next try     Airflow 3.3+)
                             reattaches and waits for its readmission
``WaitTimeout``              ``timeout`` / ``execution_timeout`` passed    yes
``AdmissionTimeout``         its queue did not admit it within             yes
                             ``admission_timeout`` (a ``WaitTimeout``)
``JobSetGone``               the JobSet was deleted or replaced meanwhile  yes
``CreationFailed``           a child object cannot be created              yes
``JobSetFailed``             terminal ``Failed`` (FailJobSet,              never (wrapped)
                             ReachedMaxRestarts)
``PodsCannotStart``          its pods cannot start (wrong image, missing   never (wrapped)
                             Secret, unschedulable, crash loop): a
                             ``JobSetFailed``, reason ``PodsCannotStart``
``PodsRefused``              the API server refuses to create its pods     never (wrapped)
                             (Pod Security, a quota, a LimitRange, a
                             missing ServiceAccount, a webhook): a
                             ``PodsCannotStart``, reason ``PodsRefused``
``QueueRefused``             its queue will not run it (a deactivated      never (wrapped)
                             Workload, a request no quota can hold, a
                             missing LocalQueue; a ``JobSetFailed``)
``SpecError``                the JobSet is invalid (nothing was created)   never (wrapped)
``IdentityMismatch``         its name belongs to another run               never (wrapped)
===========================  ============================================  ================
"""

from __future__ import annotations

from jobset_core.errors import (
    AdmissionTimeout,
    CreationFailed,
    IdentityMismatch,
    JobSetFailed,
    JobSetGone,
    JobSetPreempted,
    JobSetRestarting,
    PodsCannotStart,
    PodsRefused,
    QueueRefused,
    SpecError,
    WaitTimeout,
)

__all__ = [
    "NEVER_RETRIED",
    "AdmissionTimeout",
    "CreationFailed",
    "IdentityMismatch",
    "JobSetFailed",
    "JobSetGone",
    "JobSetPreempted",
    "JobSetRestarting",
    "PodsCannotStart",
    "PodsRefused",
    "QueueRefused",
    "SpecError",
    "WaitTimeout",
]

#: Errors the operator wraps in ``AirflowFailException``: no retry can help.
NEVER_RETRIED: tuple[type[Exception], ...] = (
    JobSetFailed,  # PodsCannotStart (PodsRefused), QueueRefused: a new try meets the same
    SpecError,
    IdentityMismatch,
)
