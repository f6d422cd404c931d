"""How a JobSet task ends badly, as exception types a retry policy can match.

=========================  =============================================  ==============
exception                  when                                           retried?
=========================  =============================================  ==============
``JobSetRestarting``       the JobSet restarted: the try ends, the next   yes
                           try continues with the same, restarting JobSet
``JobSetTimeout``          the timeout / deadline passed (JobSet deleted)  yes
``JobSetGone``             the JobSet was deleted or replaced meanwhile    yes
``JobSetFailed``           terminal ``Failed`` (FailJobSet,                never
                           ReachedMaxRestarts), or an invalid spec
=========================  =============================================  ==============
"""

from __future__ import annotations

from airflow_provider_jobset._compat import AirflowException, AirflowFailException

__all__ = ["JobSetFailed", "JobSetGone", "JobSetRestarting", "JobSetTimeout"]


class JobSetRestarting(AirflowException):
    """The JobSet restarted; the next try reattaches to it (retryable)."""


class JobSetTimeout(AirflowException):
    """The deadline passed before the JobSet finished; it was deleted (retryable)."""


class JobSetGone(AirflowException):
    """The JobSet disappeared or was replaced by a namesake while we waited (retryable)."""


class JobSetFailed(AirflowFailException):
    """The JobSet failed for good, or its spec is invalid: no retry."""
