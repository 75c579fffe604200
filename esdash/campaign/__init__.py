"""Campaigns: one study as a matrix of sessions, run resumably, point by point.

A campaign file (TOML, ``docs/campaign.md``) names a base session and the axes to vary; every
combination of axis values, repeated ``repetitions`` times, is a *point*, i.e. one complete
session and one ``esdash run``.  The package is split the way the work is:

* :mod:`~esdash.campaign.spec` reads and validates the file and materialises every point's
  session (errors name the file and the key, like session errors do);
* :mod:`~esdash.campaign.plan` orders the points so clusters and ingested data are reused
  where the axes allow (pure functions, unit-tested without any cluster);
* :mod:`~esdash.campaign.state` is the campaign directory: per-point state files and the
  ``campaign.json`` summary the dashboard reads (through :mod:`esdash.view.campaign`, with
  every other viewer: reading is the view's, not the campaign's);
* :mod:`~esdash.campaign.sweep` runs the plan inside one allocation (or locally), and
  :mod:`~esdash.campaign.submit` turns it into one Slurm job per cluster size.
"""
