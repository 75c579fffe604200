"""Widgets of the dashboard; each shows one part of a :class:`esdash.live_model.Snapshot`."""
