"""The devcluster launcher as a package (standard library only; the entry script is
``tests/cluster/devcluster.py``). One module per component:

* ``common``: paths, logging, knobs; ``procs``: ``state.json``, processes, health waits, locks;
* ``pki``: certificates (``openssl``) and kubeconfigs; ``kube``: a small REST client, kubectl;
* ``gobuild``: what is compiled, cache keys, building a bundle into the hash-keyed cache;
* ``controlplane``: etcd, kube-apiserver, controller-manager, scheduler, kwok and its nodes;
* ``logserver``: the fake nodes' containerLogs API; ``auth``: the token webhook and
  short-lived credentials (also a script of its own);
* ``jobset``: the JobSet CRD, manager and webhooks; ``kueue``: Kueue and its queues;
* ``node``, ``node_host``, ``node_config``: the real node (containerd, kubelet, CoreDNS,
  bridge, cgroups); ``images``: its images;
* ``health``: ``status``; ``lifecycle``: ``up``/``down``/``restart``/``watchdog``; ``cli``: the
  command line.
"""
