"""An auth manager for the view's end-to-end test: Airflow's simple one, except that the user
``outsider`` may read every DAG but ``view_jobset`` (a user the auth manager keeps out of one
DAG, as a real deployment's would). Loaded by the test's API server by its dotted path."""

from __future__ import annotations

from typing import Any

from airflow.api_fastapi.auth.managers.simple.simple_auth_manager import SimpleAuthManager

__all__ = ["HIDDEN_DAG", "OUTSIDER", "OneDagHidden"]

HIDDEN_DAG = "view_jobset"
OUTSIDER = "outsider"


class OneDagHidden(SimpleAuthManager):
    """The simple auth manager; ``outsider`` may not see :data:`HIDDEN_DAG`."""

    def is_authorized_dag(self, *, method: Any, user: Any, **kwargs: Any) -> bool:
        details = kwargs.get("details")
        if user.get_name() == OUTSIDER and getattr(details, "id", None) == HIDDEN_DAG:
            return False
        return bool(super().is_authorized_dag(method=method, user=user, **kwargs))
