"""The load generator: HTTP connections, ingest and query loops, MPI ranks, reading the plan
the orchestrator wrote (:mod:`esdash.prepare.plan`)."""
