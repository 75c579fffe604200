"""Widgets of the dashboard; each shows one part of a :class:`esdash.view.model.Snapshot`."""
