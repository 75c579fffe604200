"""The load generator: plan, HTTP connections, ingest and query loops, MPI ranks."""
