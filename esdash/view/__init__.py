"""What every viewer reads: the headless read model of a run and the runs around it.

* :mod:`.source` follows a run directory (stream, node statuses, cluster samples) and
  :mod:`.model` folds what it reads into snapshots: the dashboard's and any other
  viewer's model, without Textual;
* :mod:`.runs` lists sessions and runs with one rule for a run's state (running, stalled,
  finished, failed, dead, pending in Slurm);
* :mod:`.inputs` and :mod:`.intervals` load finished runs, campaigns and the authors'
  result files for reports and comparisons;
* :mod:`.compare` is the one comparison of runs, for ``esdash compare`` and the
  dashboard's compare screen;
* :mod:`.format` is the one number formatter (latencies in seconds).

Viewers only read: nothing here writes into a run directory or signals a process.
"""
