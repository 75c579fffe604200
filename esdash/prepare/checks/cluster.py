"""Checks of what the cluster needs on this host: the engine's distribution, a data root
it may use, and ports it can bind.

The ``session`` stage checks what the session names (an explicit ``cluster.home``, a
readable data-root marker, ports that fit); the ``launch`` stage what the host must have
when the run starts (the distribution in esdash's cache, a data root this cluster can
reuse, explicit ports free here).
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

from esdash.cluster import ports
from esdash.cluster.dataroot import MARKER, check_data_root, cluster_name, data_root, read_marker
from esdash.cluster.distribution import resolve_home
from esdash.errors import BadInput, EsdashError
from esdash.launch.mpi import in_allocation
from esdash.plugin import values
from esdash.plugin.checks import CheckContext, Finding, PreflightCheck


def installed_distribution(context: CheckContext) -> values.Distribution | None:
    """The distribution a run of the session would use, when it is installed here; None when
    it is not (yet): :class:`Distribution`'s finding at launch, since ``esdash fetch`` may
    still fill the cache.  Checks that count what it can run count everything without it.
    """
    session = context.session
    backend = context.plugins.backend(session.cluster.backend.name)
    try:
        return backend.inspect(resolve_home(session))
    except BadInput:
        return None


class Distribution(PreflightCheck):
    """The backend's distribution is there and complete (``cluster.home`` or esdash's cache).

    At launch, not before: ``esdash fetch`` may fill the cache after ``session check``.  A
    missing or partial one would otherwise fail every node's start, once per rank.
    """

    name = "distribution"
    description = "the search engine's distribution is unpacked and complete"
    stage = "launch"

    def run(self, context: CheckContext) -> Iterator[Finding]:
        session = context.session
        try:
            home = resolve_home(session)
        except BadInput as exc:
            yield Finding("", str(exc))
            return
        backend = context.plugins.backend(session.cluster.backend.name)
        try:
            distribution = backend.inspect(home)
        except BadInput as exc:
            if session.cluster.home is None:  # an explicit one is :class:`Home`'s finding
                yield Finding("", f"{home}: {_first_line(exc)}")
            return
        if distribution.problems:
            yield Finding("", f"{distribution.home}: {'; '.join(distribution.problems)}")


class Home(PreflightCheck):
    """An explicit ``cluster.home`` is a distribution of the session's backend.

    At the session stage, unlike :class:`Distribution`: a path the session names is as
    much the session's as a key file, and a typo in it should not wait for ``esdash run``.
    A session without ``cluster.home`` uses the cache, which ``esdash fetch`` may still
    fill before the run; that is :class:`Distribution`'s, at launch.
    """

    name = "home"
    description = "an explicit cluster.home is an unpacked distribution of the backend"
    stage = "session"

    def run(self, context: CheckContext) -> Iterator[Finding]:
        session = context.session
        home = session.cluster.home
        if home is None:
            return
        if not home.exists():
            yield Finding(
                "",
                f"{session.path}: cluster.home: {home} does not exist; point it at an unpacked "
                f"distribution, or remove it to use the newest one in esdash's cache "
                f"(`esdash fetch {session.cluster.backend.name}`)",
            )
            return
        backend = context.plugins.backend(session.cluster.backend.name)
        try:
            backend.inspect(home)
        except BadInput as exc:
            yield Finding("", f"{session.path}: cluster.home: {_first_line(exc)}")


def _first_line(error: Exception) -> str:
    return str(error).split("\n", 1)[0].strip()


class DataRootMarker(PreflightCheck):
    """The data root's marker, when there is one, can be read.

    A damaged marker says nothing about whose data the root holds; a run refuses it (or,
    with ``--fresh``, deletes that data), so ``session check`` names the file and the fix.
    """

    name = "data-root-marker"
    description = "the data root's marker (esdash-data.json) is readable"
    stage = "session"

    def run(self, context: CheckContext) -> Iterator[Finding]:
        root = _run_data_root(context)
        if context.fresh or not (root / MARKER).exists():
            return
        try:
            read_marker(root)
        except BadInput as exc:
            yield Finding("", f"{context.session.path}: cluster.data_dir: {exc}")


def _run_data_root(context: CheckContext) -> Path:
    """The data root the run uses: the context's, else the session's."""
    return context.data_root or data_root(context.session)


class DataRoot(PreflightCheck):
    """The data root can serve this cluster: same name, size and encryption, or ``--fresh``.

    Refused before launch: another size would leave shards without their node, another
    encryption mode would start nodes on what that mode keeps there; and data is never
    deleted silently (``--fresh`` asks for it).
    """

    name = "data-root"
    description = "the data root holds nothing this cluster cannot reuse"
    stage = "launch"

    def run(self, context: CheckContext) -> Iterator[Finding]:
        session = context.session
        root = _run_data_root(context)
        mode = context.plugins.encryption(session.encryption.name)
        try:
            check_data_root(root, cluster_name(session), session.cluster.nodes, context.fresh, mode)
        except BadInput as exc:
            if not (root / MARKER).exists() or _marker_readable(root):
                yield Finding("", str(exc))
            # else: DataRootMarker's finding (session stage, run at launch too)


def _marker_readable(root: Path) -> bool:
    try:
        read_marker(root)
    except BadInput:
        return False
    return True


class PortsValid(PreflightCheck):
    """Explicit ports whose ranges fit below 65535 and do not overlap (HTTP vs transport).

    Static, at the session stage: node-local rank *k* uses base + *k*
    (:func:`esdash.cluster.ports.static_problems`), so ``http_port == transport_port`` or
    ranges closer than the nodes on one address would fail the engines' bind after the
    cluster step started.
    """

    name = "ports"
    description = "explicit ports stay below 65535 and HTTP and transport do not overlap"
    stage = "session"

    def run(self, context: CheckContext) -> Iterator[Finding]:
        session = context.session
        for line in ports.static_problems(session):
            yield Finding("", f"{session.path}: {line}")


class PortsFree(PreflightCheck):
    """The session's explicit ports are free here, for the nodes that will run on this host.

    Checked before anything starts, because a node that finds its port taken fails only
    after its JVM has booted, deep in a stack trace.  Only explicit ports: automatic ones
    are chosen free by the ranks.  Outside an allocation all nodes run here (``mpiexec``);
    inside one this host runs its first ``nodes_per_host``.  Every rank checks again on its
    own host before any node starts (:mod:`esdash.cluster.rank`), which covers the other
    hosts of an allocation.  An interconnect without an address here is no finding of this
    check: the ranks report it where they run.
    """

    name = "ports-free"
    description = "the session's explicit ports are not in use on this host"
    stage = "launch"

    def run(self, context: CheckContext) -> Iterator[Finding]:
        session = context.session
        if not ports.explicit_ports(session):
            return
        cluster = session.cluster
        try:
            endpoint = context.plugins.interconnect(cluster.interconnect).resolve(cluster.interface)
        except EsdashError:
            return
        here = min(cluster.nodes, cluster.nodes_per_host) if in_allocation() else cluster.nodes
        for line in ports.check_explicit(session, endpoint.address, range(here)):
            key, _, message = line.partition(": ")
            yield Finding(key, message)
