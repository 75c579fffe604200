"""This machine: what ``esdash doctor`` checks and how ``esdash fetch`` fills the cache.

The engine-specific parts (which distribution, which Java) come from the backend plugin; the
encryption modes add their own checks.  Nothing here runs on a rank.
"""
