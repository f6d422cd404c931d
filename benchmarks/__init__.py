"""The benchmark suite behind ``make bench``: ours against the ``cncf.kubernetes`` provider.

Every figure is measured in one run with its anchor (the provider's ``KubernetesJobTrigger``,
``KubernetesPodTrigger`` or ``KubernetesJobOperator``, the upstream JobSet controller,
``kubectl``, run with their defaults, as their users run them) and, where one exists, a floor
(what the same job costs done by hand: a raw watch with the official ``kubernetes`` client, a
bare interpreter start). API requests are counted at the API server, from its audit log.

Families (one module each, one chart each):

=============  ===========================================================================
``detection``  completion → the waiter answers, every way in, both backends (``detection``)
``scale``      1,000 waiting tasks in one triggerer over 1, 10 and 100 namespaces (``scale``)
``pods``       what the pod and Event watches cost for a JobSet of 1,000 pods (``pods``)
``native``     the native backend's fan-out and reconcile requests (``native``)
``local``      ``jobsetctl validate`` start, validation throughput, import cost (``local``)
``queue``      1,000 tasks queued in Kueue in one triggerer; admission → task log (``queue``)
=============  ===========================================================================

The suite's devcluster runs Kueue (the queue family needs it); the other families' JobSets
carry no queue label, so Kueue's webhooks never see them.

``python -m benchmarks run`` measures (``--profile smoke``: tiny sizes, what ``make test``
runs so the code never rots); ``python -m benchmarks report`` turns the JSON into the docs
page and the charts. Nothing here asserts a threshold: goals are reported, never tested.
"""
