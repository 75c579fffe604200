"""The run stream: the versioned record format, its writer (rank 0) and poll-based reader."""
