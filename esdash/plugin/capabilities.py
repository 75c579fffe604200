"""What a distribution can run: queries and their parts against its modules.

The plan (:mod:`esdash.prepare.plan`) keeps a query the distribution cannot run, with the
reason, so it is reported as unsupported instead of silently missing; pre-flight checks ask
the same question before a launch (how many steps a balanced order has to balance).  A
track's plan asks it too, and more (:mod:`esdash.plugin.planning`, whose tables this module
shares).
"""

from __future__ import annotations

from collections.abc import Sequence

from esdash.plugin.planning import MODULE_PARTS, body_parts
from esdash.plugin.values import Distribution, QueryStep
from esdash.rundir.records import JsonMapping


def missing_capability(
    requires: tuple[str, ...], distribution: Distribution, body: JsonMapping | None = None
) -> str | None:
    """Why a distribution cannot run a query that needs ``requires`` (None: it can).

    Besides what the track declares, the body is checked for parts whose module the
    distribution lacks (only known for the integ-test-zip, whose module list is complete).
    """
    for capability in requires:
        if capability == "scripting" and not distribution.scripting:
            return (
                f"needs scripting (painless), which this {distribution.flavor} "
                f"distribution {distribution.version} lacks; use an official tarball"
            )
    if body is not None and distribution.flavor.startswith("integ-test-zip"):
        for part in sorted(body_parts(body) & set(MODULE_PARTS)):
            module = MODULE_PARTS[part]
            if module not in distribution.modules:
                return (
                    f"needs {part} from the {module} module, which this {distribution.flavor} "
                    f"distribution {distribution.version} lacks; use an official tarball"
                )
    return None


def runnable_steps(steps: Sequence[QueryStep], distribution: Distribution) -> int:
    """How many of ``steps`` have at least one query the distribution can run."""
    return sum(
        1
        for step in steps
        if any(
            missing_capability(tuple(q.requires), distribution, q.body) is None
            for q in step.queries
        )
    )
