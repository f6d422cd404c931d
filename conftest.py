"""Repository-wide pytest setup: the devcluster plugin (fixtures ``devcluster``,
``cluster_namespace`` and the ``cluster`` marker) is available to every test."""

pytest_plugins = ["tests.cluster.pytest_devcluster"]
