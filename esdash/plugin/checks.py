"""Pre-flight checks: one list that every way into a run executes before it launches anything.

``esdash session check``, ``esdash sweep --dry-run``, the dashboard's validate key and
``esdash run`` / ``cluster up`` / ``submit`` run the same checks
(:func:`esdash.prepare.checks.findings` assembles them: esdash's own and every plugin's from
the ``esdash_register_checks`` hook), so what one of them accepts the others never refuse
for a reason a check knows.

A check has a *stage*: ``"session"`` checks need only the session and this host's files
(keys, passwords, query files); ``"launch"`` checks look at what a launch uses here (the
distribution, the data root) and run when a run is about to start.  Checks of the session
stage run at launch too.  A check returns :class:`Finding` objects: each names the session
key and says what to do, in one line.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, ClassVar, Literal, Protocol

from esdash.plugin.options import Problem

if TYPE_CHECKING:
    from esdash.plugin.api import Backend, EncryptionMode, Interconnect, Track
    from esdash.plugin.session import Session
    from esdash.plugin.values import Owner

Stage = Literal["session", "launch"]
STAGES: tuple[Stage, ...] = ("session", "launch")


class Plugins(Protocol):
    """What a check may ask of the loaded plugins: the registered objects the session chose,
    by name (:class:`esdash.plugin.manager.PluginSet` is one; a check needs no more of it)."""

    def backend(self, name: str) -> Backend: ...

    def interconnect(self, name: str) -> Interconnect: ...

    def encryption(self, name: str) -> EncryptionMode: ...

    def track(self, name: str) -> Track: ...


@dataclass(frozen=True)
class Finding(Problem):
    """One problem a check found: ``key`` is the session key it concerns ("" when the message
    names it itself), ``message`` what to do about it.

    A :class:`~esdash.plugin.options.Problem` of the session, so that a check's line reads as
    an option's does (``key: message``), written in one place.
    """


@dataclass(frozen=True)
class CheckContext:
    """What a check may look at: the session, the loaded plugins and the launch options."""

    session: Session
    plugins: Plugins
    #: The account nodes run as (None when it cannot be resolved: a check names that itself).
    owner: Owner | None = None
    #: ``--fresh``: the run may delete the data root's old data.
    fresh: bool = False
    #: The data root the run uses (its node data and what modes keep beside it, e.g. salts).
    data_root: Path | None = None
    #: ``--threshold`` specifications the run is judged by (``esdash run``, ``session check``).
    thresholds: tuple[str, ...] = ()


class PreflightCheck(ABC):
    """A check of a session before launch; register one with ``esdash_register_checks``."""

    kind: ClassVar[str] = "check"
    #: Unique among checks (``esdash plugins`` lists it).
    name: str
    #: One line: what it checks.
    description: str
    stage: Stage = "session"

    @abstractmethod
    def run(self, context: CheckContext) -> Iterable[Finding]:
        """The problems found (none: the session passes this check).

        Look, change nothing: create no file, start no process, ask no person.  Raise
        nothing on bad input: return a finding naming the key and the fix.
        """


def run_checks(checks: Sequence[PreflightCheck], context: CheckContext, stage: Stage) -> list[str]:
    """Every finding of ``checks`` at ``stage`` (launch includes session), as lines.

    A check that raises is a finding of its own, naming the check: one broken check must not
    hide the others' findings.
    """
    wanted = STAGES[: STAGES.index(stage) + 1]
    lines: list[str] = []
    for check in checks:
        if check.stage not in wanted:
            continue
        try:
            lines.extend(str(finding) for finding in check.run(context))
        except Exception as exc:  # a plugin's check may fail in any way: report it, go on
            lines.append(f"check {check.name!r} failed: {type(exc).__name__}: {exc}")
    return lines
