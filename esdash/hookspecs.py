"""The plugin contract: every hook esdash calls, with its reference documentation.

A plugin is a module (or object) with functions named after these hooks and decorated with
``@esdash.hookimpl``.  Packages announce plugins through the entry-point group ``esdash``::

    [project.entry-points.esdash]
    my-track = "my_package.my_module"

Registration hooks receive a ``register`` callable.  Each call registers one object of the
hook's kind (see :mod:`esdash.plugin_api`); esdash stamps it with the plugin that gave it, and a
name registered twice is an error naming both plugins.

Lifecycle hooks run on rank 0 only and at most once per interval: the load generator's hot
path never calls a plugin.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pluggy

hookspec = pluggy.HookspecMarker("esdash")


@hookspec
def esdash_register_backends(register: Callable[[Any], None]) -> None:
    """Register search engines esdash can spawn.

    Call ``register(backend)`` with an instance of :class:`esdash.plugin_api.Backend`.  A
    backend inspects a distribution directory (version, flavor, modules), renders node
    configuration from the cluster topology, builds the command that runs a node and gives a
    client for the running cluster.  Sessions choose it with ``cluster.backend``.
    """


@hookspec
def esdash_register_interconnects(register: Callable[[Any], None]) -> None:
    """Register networks the nodes can talk over.

    Call ``register(interconnect)`` with an instance of
    :class:`esdash.plugin_api.Interconnect`.  An interconnect finds the interface and address
    a node binds and publishes on (by interface name patterns or an explicit
    ``cluster.interface``) and fails with a message naming the host when it is missing.
    Sessions choose it with ``cluster.interconnect``.
    """


@hookspec
def esdash_register_encryption_modes(register: Callable[[Any], None]) -> None:
    """Register ways of protecting the data.

    Call ``register(mode)`` with an instance of :class:`esdash.plugin_api.EncryptionMode`.
    A mode decides where a node's data lives (plain directory, encrypted mount) and, for
    client-side modes, how documents, mappings and queries are transformed and responses
    decoded: ``client_codec`` returns a :class:`esdash.plugin_api.ClientCodec`, used once at
    plan time for the mapping and the queries, and in every bench rank for documents and
    responses.  Sessions choose it with ``encryption.mode``; its options are the other keys
    of the ``[encryption]`` table.
    """


@hookspec
def esdash_register_tracks(register: Callable[[Any], None]) -> None:
    """Register workloads.

    Call ``register(track)`` with an instance of :class:`esdash.plugin_api.Track`: index
    settings and mapping, a corpus (file or generator), the field schema (types and ranges)
    and query steps.  Sessions choose it with ``track.name``; its options are the other keys
    of the ``[track]`` table.
    """


@hookspec
def esdash_session_started(session: Any, run_dir: Any) -> None:
    """Called once on rank 0 when a session starts, before the cluster is launched.

    ``session`` is the validated :class:`esdash.session.Session`; ``run_dir`` the run's
    directory (a :class:`pathlib.Path`), where a plugin may write extra artefacts.
    """


@hookspec
def esdash_interval(session: Any, record: dict[str, Any]) -> None:
    """Called on rank 0 after each merged interval record was written to the run stream.

    ``record`` is the interval record as stored in ``stream.jsonl``.  Keep this cheap: it
    runs once per interval (1 s by default) while the benchmark is running.
    """


@hookspec
def esdash_session_finished(session: Any, run_dir: Any, results: dict[str, Any] | None) -> None:
    """Called once on rank 0 when a session ends, successfully or not.

    ``results`` is the content of ``results.json``, or ``None`` when the session failed
    before producing results.
    """
