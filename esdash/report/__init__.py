"""Summaries, thresholds and reports built from results and run streams."""
