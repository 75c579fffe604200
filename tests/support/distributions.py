"""Installed plugin distributions written by hand: one module and a dist-info with an entry point.

``importlib.metadata`` finds a ``*.dist-info`` directory on ``sys.path`` (or ``PYTHONPATH``
for a subprocess) exactly as it finds one pip wrote, so the real loader sees a real entry point.
"""

from __future__ import annotations

import inspect
from pathlib import Path

from esdash.plugin import spec


def install_distribution(root: Path, dist: str, entry_point: str, source: str) -> str:
    """Write one module and a dist-info announcing it in the ``esdash`` group; return the module."""
    module = entry_point.replace("-", "_") + "_plugin"
    (root / f"{module}.py").write_text(source, encoding="utf-8")
    info = root / f"{dist.replace('-', '_')}-1.0.dist-info"
    info.mkdir()
    (info / "METADATA").write_text(f"Metadata-Version: 2.1\nName: {dist}\nVersion: 1.0\n")
    (info / "entry_points.txt").write_text(f"[esdash]\n{entry_point} = {module}\n")
    return module


def hookspecs() -> dict[str, object]:
    """Every hook of the contract, by name."""
    return {
        name: function
        for name, function in vars(spec).items()
        if inspect.isfunction(function) and hasattr(function, "esdash_spec")
    }


#: Observer hooks called only in some runs: ``esdash_leakage`` only for client-side encryption.
CONDITIONAL_HOOKS = frozenset({"esdash_leakage"})


def observer_hooks() -> list[str]:
    """The hooks the orchestrator calls in every run (not registration, not conditional)."""
    return sorted(
        name
        for name in hookspecs()
        if not name.startswith("esdash_register_") and name not in CONDITIONAL_HOOKS
    )


#: A plugin recording every observer call, as JSON lines, in the file ``$ESDASH_OBSERVER_LOG``.
RECORDER = """
import json
import os

import msgspec

from esdash.plugin_api import hookimpl


def _log(hook, session, **values):
    entry = {"hook": hook, "session": session.name}
    entry.update({k: msgspec.to_builtins(v, enc_hook=str) for k, v in values.items()})
    with open(os.environ["ESDASH_OBSERVER_LOG"], "a", encoding="utf-8") as log:
        log.write(json.dumps(entry) + "\\n")


@hookimpl
def esdash_session_started(session, run_dir):
    _log("esdash_session_started", session, run_dir=str(run_dir))


@hookimpl
def esdash_interval(session, record):
    _log("esdash_interval", session, record=record)


@hookimpl
def esdash_session_finished(session, run_dir, results):
    _log("esdash_session_finished", session, run_dir=str(run_dir), results=results)
"""
