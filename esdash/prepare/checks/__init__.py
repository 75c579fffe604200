"""esdash's own pre-flight checks, and the one function every way into a run calls.

The registry (:class:`esdash.plugin.checks.PreflightCheck`, the ``esdash_register_checks``
hook) is part of the plugin contract; this package adds the checks of the core, one module
per theme (:mod:`.track`, :mod:`.tasks`, :mod:`.rounds`, :mod:`.targets`, :mod:`.security`,
:mod:`.cluster`), and runs the whole list: ``esdash session check``, ``esdash sweep
--dry-run`` and the dashboard's validate key at the ``session`` stage, run preparation
(``esdash run``, ``cluster up``, ``submit``, sweeps) at the ``launch`` stage.  A new check is
added here or by a plugin, never at one of those call sites.
"""

from __future__ import annotations

from esdash.cluster.dataroot import data_root
from esdash.errors import BadInput
from esdash.plugin.checks import CheckContext, PreflightCheck, Stage, run_checks
from esdash.plugin.manager import PluginSet, get_plugins
from esdash.plugin.values import Owner
from esdash.prepare.checks.cluster import (
    DataRoot,
    DataRootMarker,
    Distribution,
    Home,
    PortsFree,
    PortsValid,
)
from esdash.prepare.checks.rounds import StepOrder, WarmupBound
from esdash.prepare.checks.security import EncryptionOptions, SecurityOff
from esdash.prepare.checks.targets import References, Thresholds
from esdash.prepare.checks.tasks import TasksRun
from esdash.prepare.checks.track import CorpusPresent, IndexShards, TrackLoads
from esdash.session import Session

#: esdash's own checks, run before the plugins' (in this order).
CORE_CHECKS: tuple[PreflightCheck, ...] = (
    EncryptionOptions(),
    TrackLoads(),
    CorpusPresent(),
    TasksRun(),
    StepOrder(),
    WarmupBound(),
    References(),
    Thresholds(),
    IndexShards(),
    SecurityOff(),
    PortsValid(),
    Home(),
    DataRootMarker(),
    Distribution(),
    DataRoot(),
    PortsFree(),
)


def all_checks(plugins: PluginSet) -> list[PreflightCheck]:
    """The core's checks, then every plugin's."""
    return [*CORE_CHECKS, *plugins.checks()]


def findings(
    session: Session,
    stage: Stage,
    *,
    fresh: bool = False,
    owner: Owner | None = None,
    plugins: PluginSet | None = None,
    thresholds: tuple[str, ...] = (),
) -> list[str]:
    """Every problem the checks of ``stage`` find in ``session``, one line each, once.

    ``thresholds`` are the ``--threshold`` specifications of the run (or of ``session
    check``); a line two checks both find (the same file seen twice) is listed once.
    """
    plugins = plugins or get_plugins()
    context = CheckContext(
        session=session,
        plugins=plugins,
        owner=owner,
        fresh=fresh,
        data_root=data_root(session),
        thresholds=tuple(thresholds),
    )
    return list(dict.fromkeys(run_checks(all_checks(plugins), context, stage)))


def require(
    session: Session,
    stage: Stage,
    *,
    fresh: bool = False,
    owner: Owner | None = None,
    plugins: PluginSet | None = None,
    thresholds: tuple[str, ...] = (),
) -> None:
    """Raise :class:`BadInput` listing every finding (one per line), if there is any."""
    lines = findings(
        session, stage, fresh=fresh, owner=owner, plugins=plugins, thresholds=thresholds
    )
    if lines:
        raise BadInput("\n".join(lines))
