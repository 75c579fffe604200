"""Runs: the one way a run starts (here or as a Slurm job) and the one way it stops.

* :mod:`.start`: prepare a run directory (pre-flight checks first), start the cluster's
  ranks and wait for it, submit a session to Slurm, start ``esdash run`` detached;
* :mod:`.stop`: stop a cluster (stop file, then the launcher's process group, TERM and
  KILL through :mod:`esdash.launch.process`, ``scancel``, storage released), stay with a
  foreground cluster, stop a whole run the way Ctrl-C would;
* :mod:`.job`: ``esdash run``: cluster, benchmark ranks, following the stream, observer
  hooks, results and summary.

The command line, the dashboard and sweeps all come here; none of them starts or signals a
process of a run on its own.
"""
