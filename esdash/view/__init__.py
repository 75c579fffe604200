"""What every viewer reads: the headless read model of a run and the runs around it.

* :mod:`.source` follows a run directory (stream, node statuses, cluster samples) and
  :mod:`.model` folds what it reads into snapshots: the dashboard's and any other
  viewer's model, without Textual;
* :mod:`.runs` lists runs with one rule for a run's state (running, stalled, finished,
  failed, dead, pending in Slurm);
* :mod:`.inputs` and :mod:`.intervals` load finished runs, campaigns and the authors'
  result files for reports and comparisons;
* :mod:`.compare` is the one comparison of runs, for ``esdash compare`` and the
  dashboard's compare screen;
* :mod:`.format` is the one number formatter (latencies in seconds);
* :mod:`.summary` renders a run's results as the end-of-run summary and its stream as live
  lines, which :mod:`.live` prints while ``esdash run`` follows the stream;
  :mod:`.thresholds` and :mod:`.references` judge results against a session's thresholds
  and references.  ``esdash run`` prints them when a run ends, so they sit here, below
  :mod:`esdash.run`, rather than with the report documents.

Viewers only read: nothing here writes into a run directory or signals a process.
"""
