"""Test infrastructure shared by the integration tests: prerequisites, processes, ports,
a private Slurm cluster, network namespaces and Elasticsearch nodes.

``tests/`` is on ``sys.path`` (pytest puts the directory of the root ``conftest.py`` there),
so test modules import these as ``from support.slurm import SlurmCluster``.
"""
