"""Part of esdash; see the house plan in docs."""
