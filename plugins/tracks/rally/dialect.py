"""Rally tracks and OpenSearch Benchmark workloads: the names that differ, in one place.

OpenSearch Benchmark (OSB) is a fork of Rally and reads the same format under other names
(osbenchmark/workload/loader.py; the opensearch-benchmark-workloads repository):

=========================  ============================  ==================================
                           Rally                         OpenSearch Benchmark
=========================  ============================  ==================================
the file                   ``track.json``                ``workload.json``
its Python code            ``track.py``                  ``workload.py``
scenarios                  ``challenges``/``challenge``  ``test_procedures``/``test_procedure``
template helpers           ``rally.helpers`` (``rally``)  ``benchmark.helpers`` (``benchmark``)
shared parts               --                            ``../common_operations/*.json``
=========================  ============================  ==================================

The rest (indices, corpora, operations, schedules, ``schedule`` without scenarios, the
``default`` flag, ``collect`` and ``exists_set_param``) is the same.  The loader asks
:func:`dialect_of_file` which names a directory uses, and errors say "test procedure" for
a workload.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path


@dataclass(frozen=True)
class Dialect:
    """The file and key names of one tool's track format, and the words its errors use."""

    #: What the format calls itself in messages: "track" or "workload".
    kind: str
    #: The tool, for messages: "Rally" or "OpenSearch Benchmark".
    tool: str
    #: The track file in the directory.
    spec_file: str
    #: The Python file beside it (custom runners, parameter sources).
    python_file: str
    #: The list and the single-scenario keys of the track file.
    procedures_key: str
    procedure_key: str
    #: A scenario, in messages ("challenge", "test procedure"), and the plural.
    procedure: str
    procedures: str
    #: Directories beside the track directory whose files its templates may collect.
    shared_dirs: tuple[str, ...] = ()

    def shared(self, directory: Path) -> tuple[Path, ...]:
        """The shared directories of the track in ``directory`` (they need not exist)."""
        return tuple(directory.parent / name for name in self.shared_dirs)


RALLY = Dialect(
    kind="track",
    tool="Rally",
    spec_file="track.json",
    python_file="track.py",
    procedures_key="challenges",
    procedure_key="challenge",
    procedure="challenge",
    procedures="challenges",
)
OSB = Dialect(
    kind="workload",
    tool="OpenSearch Benchmark",
    spec_file="workload.json",
    python_file="workload.py",
    procedures_key="test_procedures",
    procedure_key="test_procedure",
    procedure="test procedure",
    procedures="test procedures",
    # opensearch-benchmark-workloads: test_procedures/default.json collects
    # "../../common_operations/workload_setup.json", the repository's shared operations.
    shared_dirs=("common_operations",),
)
DIALECTS = (RALLY, OSB)
#: The names ``{% import %}`` accepts for the helper macros (same macros for both tools).
HELPER_TEMPLATES = {"rally.helpers": RALLY, "benchmark.helpers": OSB}


def dialect_of_file(spec_file: Path) -> Dialect:
    """The dialect of a track file, by its name (``workload.json``: OSB; else Rally)."""
    return OSB if spec_file.name == OSB.spec_file else RALLY


def dialect_of(directory: Path) -> Dialect:
    """The dialect of a track directory: Rally when it holds ``track.json``, OSB when it
    holds only ``workload.json`` (some OSB workloads still carry an old ``track.json``;
    esdash then reads the directory as the Rally track, as Rally would)."""
    if (directory / RALLY.spec_file).is_file():
        return RALLY
    if (directory / OSB.spec_file).is_file():
        return OSB
    return RALLY


def track_python_file(directory: Path) -> Path:
    """The Python file of the track in ``directory``: ``track.py`` or ``workload.py``.

    Whoever looks for a track's own code (the static scan of what it registers, running its
    ``register``) asks here, so that a workload's ``workload.py`` is found as Rally's
    ``track.py`` is.  The file need not exist.
    """
    return directory / dialect_of(directory).python_file
