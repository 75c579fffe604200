"""A configuration is a session fingerprint: every setting that changes what a run measures.

Runs are repetitions of one configuration only when they measured the same thing.  A few
labels (encryption mode, interconnect, nodes, workers per node) are not enough: a
2,000-document and a 1,000-document session with other step lengths share them, and
pooling the two gives a mean of two different quantities.  :func:`fingerprint` reads what
a run directory records -- the session copy (``session.toml``, or the stream header's
copy), ``bench.json``, ``results.json`` and ``run.json`` -- and gives one flat mapping of
named keys; runs are one configuration exactly when their fingerprints are equal.

The keys, in this order:

* ``track.name`` and every option of ``[track]`` as written (``track.documents``,
  ``track.seed``, ``track.test_mode``, ``track.challenge``, ``track.path`` of a Rally track
  -- the track's identity, since ``rally`` alone says nothing);
* ``corpus.documents`` (the documents the plan ingests, from ``bench.json`` or the header),
  ``corpus.identity`` and ``index.layout`` (digests of the ``_meta.esdash`` fingerprint of
  every index the plan made: the corpus's size, document count, offsets hash and generator,
  then the mapping and index settings; see ``docs/stream.md``), ``steps`` (the planned steps
  and their queries, each once whatever the rounds) and ``steps.bodies`` (a digest of the
  request bodies);
* ``benchmark.*``: step durations, warm-up (per step and global), rounds and order, workers
  per node, bulk size, target throughput, seed, settling -- every key esdash declares for
  ``[benchmark]``, with its default when the session leaves it out and durations in
  seconds, so ``"5s"``, ``"5000ms"`` and an omitted default of 5 s are one value; the
  order and rounds as the run's plan made them (``auto`` resolved, an older run's default
  of one listed round as such);
* ``cluster.*``: nodes, nodes per host, heap (bytes), interconnect, security, and the
  backend's options; ``engine`` and ``engine.version`` (as the cluster reported them, else
  as ``run.json`` recorded them);
* ``encryption.mode``, the mode's options, and ``encryption.layout`` (a digest of the
  client codec's secret-free description in ``bench.json``).

Not in it, because they do not change the measurement: ``name``, ``description``,
``[slurm]``, ``[references]``, paths (``cluster.home``, ``cluster.data_dir``,
``benchmark.queries`` -- its steps and bodies are in), where secrets and inputs are read
from (a plugin option named ``*_file``, ``*_dir`` or ``*_command``), the recording interval,
the node account, ports and time-outs (:data:`NOT_MEASURED`).  A key a run does not record
(an older run without ``bench.json``) is ``None``, which differs from any recorded value: two
runs are pooled only when nothing says they differ *and* both say what they are.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping, Sequence

from esdash.plugin.options import parse_duration, parse_size
from esdash.plugin.values import Option
from esdash.rundir.keys import digest
from esdash.rundir.records import (
    BenchPlan,
    Header,
    JsonMapping,
    JsonObject,
    JsonValue,
    Results,
    RunInfo,
)
from esdash.session import BENCHMARK, CLUSTER, DEFAULT_BACKEND

#: A run's fingerprint: named keys (dotted, as in a session file where one exists) to values.
Fingerprint = dict[str, JsonValue]

#: Session keys that do not change what is measured (see the module docstring).
NOT_MEASURED = frozenset(
    {
        "cluster.backend",  # the engine: the key ``engine``
        "cluster.home",
        "cluster.data_dir",
        "cluster.interface",
        "cluster.run_as",
        "cluster.owner_grace",
        "cluster.http_port",
        "cluster.transport_port",
        "cluster.insecure_ok",
        "benchmark.interval",
        "benchmark.settle_timeout",
        "benchmark.queries",
    }
)
#: Plugin options with these name endings say where something is read from, not what runs.
LOCATION_SUFFIXES = ("_file", "_dir", "_command")
#: Values longer than this are kept as a digest (a mapping, a codec's description).
LONGEST_VALUE = 60

_DECLARED: dict[str, Option] = {
    **{f"cluster.{o.name}": o for o in CLUSTER},
    **{f"benchmark.{o.name}": o for o in BENCHMARK},
}


def _canonical(value: object) -> JsonValue:
    """Lists and tables as compact JSON text (a fingerprint value is a scalar)."""
    if value is None or isinstance(value, bool | int | float | str):
        return value
    text = json.dumps(value, sort_keys=True, separators=(",", ":"), default=str)
    return text if len(text) <= LONGEST_VALUE else f"sha256:{digest(json.loads(text), 12)}"


def _normalized(key: str, value: object) -> JsonValue:
    """A declared session key in its unit (seconds, bytes); a value that does not parse is
    kept as written (it still tells runs apart)."""
    option = _DECLARED.get(key)
    if option is None or value is None:
        return _canonical(value)
    try:
        if option.kind == "duration":
            return parse_duration(value)
        if option.kind == "size":
            return parse_size(value)
        if option.kind == "float" and isinstance(value, int) and not isinstance(value, bool):
            return float(value)
    except ValueError:
        pass
    return _canonical(value)


def _table(session: JsonMapping, name: str) -> JsonMapping:
    found = session.get(name)
    return found if isinstance(found, Mapping) else {}


def _declared(session: JsonMapping, section: str) -> Fingerprint:
    """Every measured key esdash declares for ``section``, defaults filled in, plus keys the
    copy holds that this esdash does not declare (an older or newer run's)."""
    table = _table(session, section)
    found: Fingerprint = {}
    for key, option in _DECLARED.items():
        if not key.startswith(f"{section}.") or key in NOT_MEASURED or option.kind == "path":
            continue
        if option.name in table:
            found[key] = _normalized(key, table[option.name])
        else:
            found[key] = None if option.required else _normalized(key, option.default)
    for name, value in table.items():
        key = f"{section}.{name}"
        if key not in _DECLARED and key not in NOT_MEASURED and not isinstance(value, Mapping):
            found[key] = _canonical(value)
    return found


def _plugin_options(table: JsonMapping, prefix: str, selector: str | None) -> Fingerprint:
    """A plugin's options as written, without those that only say where something is."""
    return {
        f"{prefix}.{name}": _canonical(value)
        for name, value in sorted(table.items())
        if name != selector and not name.endswith(LOCATION_SUFFIXES)
    }


def _stamps(plan: BenchPlan) -> list[JsonObject]:
    """The ``_meta.esdash`` object of every index of the plan, in order."""
    found: list[JsonObject] = []
    for index in plan.all_indices:
        mappings = index.body.get("mappings")
        meta = mappings.get("_meta") if isinstance(mappings, Mapping) else None
        stamp = meta.get("esdash") if isinstance(meta, Mapping) else None
        found.append(dict(stamp) if isinstance(stamp, Mapping) else {})
    return found


def _fingerprint_part(stamp: JsonMapping, part: str) -> JsonValue:
    inner = stamp.get("fingerprint")
    found: JsonValue = inner.get(part) if isinstance(inner, Mapping) else None
    return found


def _steps(header: Header | None, results: Results) -> JsonValue:
    """The planned steps with their queries, each once (rounds repeat them), sorted: the
    order of a round is ``benchmark.order`` (a random order differs from run to run)."""
    named: list[str] = []
    if header is not None and header.steps:
        items: Iterable[tuple[str, Sequence[str]]] = ((s.name, s.queries) for s in header.steps)
    else:
        items = ((s.name, s.planned.queries or list(s.queries)) for s in results.steps)
    for name, queries in items:
        text = name if list(queries) in ([name], []) else f"{name}[{'+'.join(queries)}]"
        if text not in named:
            named.append(text)
    if not named:
        return None
    named.sort()
    joined = ", ".join(named)
    return (
        joined
        if len(joined) <= LONGEST_VALUE
        else f"{len(named)} steps, sha256:{digest(named, 12)}"
    )


def _rounds(plan: BenchPlan | None, results: Results) -> Fingerprint:
    """The order and rounds the run used, not the words of its session: ``auto`` is
    mirrored or listed depending on the track, and what an omitted key meant changed
    (listed until mirrored rounds became the default).  None where the run does not say."""
    if plan is not None:
        return {"benchmark.order": plan.order, "benchmark.repetitions": plan.repetitions}
    if results.rounds is not None:
        rounds = results.rounds
        return {"benchmark.order": rounds.order, "benchmark.repetitions": rounds.repetitions}
    return {"benchmark.order": None, "benchmark.repetitions": None}


def _bodies(plan: BenchPlan | None) -> JsonValue:
    if plan is None:
        return None
    bodies = {
        f"{step.name}/{query.name}": query.body for step in plan.steps for query in step.queries
    }
    return f"sha256:{digest(bodies, 12)}"


def fingerprint(
    session: JsonMapping,
    *,
    results: Results,
    header: Header | None = None,
    info: RunInfo | None = None,
    plan: BenchPlan | None = None,
) -> Fingerprint:
    """The fingerprint of one run (see the module docstring for every key)."""
    track = _table(session, "track")
    encryption = _table(session, "encryption")
    cluster = _table(session, "cluster")
    found: Fingerprint = {"track.name": _canonical(track.get("name"))}
    found.update(_plugin_options(track, "track", "name"))
    stamps = _stamps(plan) if plan is not None else []
    if plan is not None:
        documents: JsonValue = plan.documents_total
    elif header is not None and header.ingest is not None:
        documents = header.ingest.docs_total
    else:
        documents = None
    found["corpus.documents"] = documents
    found["corpus.identity"] = (
        _canonical([_fingerprint_part(s, "corpus") for s in stamps]) if stamps else None
    )
    found["index.layout"] = (
        _canonical(
            [[_fingerprint_part(s, "mapping"), _fingerprint_part(s, "settings")] for s in stamps]
        )
        if stamps
        else None
    )
    found["steps"] = _steps(header, results)
    found["steps.bodies"] = _bodies(plan)
    found.update(_declared(session, "benchmark"))
    found.update(_rounds(plan, results))
    found.update(_declared(session, "cluster"))
    options = cluster.get("backend_options")
    if isinstance(options, Mapping):
        found.update(_plugin_options(options, "cluster.backend_options", None))
    backend = cluster.get("backend", DEFAULT_BACKEND)
    found["engine"] = _canonical(backend)
    facts = results.cluster
    found["engine.version"] = (facts.version if facts is not None else None) or (
        info.version if info is not None else None
    )
    mode = encryption.get("mode") or results.encryption or "none"
    found["encryption.mode"] = _canonical(mode)
    found.update(_plugin_options(encryption, "encryption", "mode"))
    codec = plan.client_codec if plan is not None else None
    found["encryption.layout"] = None if codec is None else f"sha256:{digest(codec, 12)}"
    return found


# ------------------------------------------------------------------------- differences


def differing(prints: Sequence[Mapping[str, JsonValue]]) -> list[str]:
    """The keys whose values are not the same in all ``prints`` (a missing key is None),
    in fingerprint order."""
    keys: list[str] = []
    for found in prints:
        keys += [k for k in found if k not in keys]
    return [k for k in keys if len({_text(p.get(k)) for p in prints}) > 1]


def _text(value: JsonValue) -> str:
    return json.dumps(value, sort_keys=True)


def show(key: str, value: JsonValue) -> str:
    """A fingerprint value as a person reads it: ``5s``, ``512m``, ``unset``."""
    if value is None:
        return "unset"
    if isinstance(value, bool):
        return "true" if value else "false"
    option = _DECLARED.get(key)
    if option is not None and isinstance(value, int | float):
        if option.kind == "duration":
            return f"{value:g}s"
        if option.kind == "size":
            mib = int(value) // 1024**2
            if mib and int(value) % 1024**2 == 0:
                return f"{mib // 1024}g" if mib % 1024 == 0 else f"{mib}m"
    return str(value)


def describe(prints: Sequence[Mapping[str, JsonValue]], keys: Sequence[str] | None = None) -> str:
    """``track.documents (2000 vs 1000), benchmark.duration (5s vs 3s)``: each differing key
    with its values in the order the prints give them (three or more: comma-separated)."""
    parts = []
    for key in differing(prints) if keys is None else keys:
        values: list[str] = []
        for found in prints:
            shown = show(key, found.get(key))
            if shown not in values:
                values.append(shown)
        parts.append(f"{key} ({' vs '.join(values) if len(values) == 2 else ', '.join(values)})")
    return ", ".join(parts)


__all__ = [
    "LOCATION_SUFFIXES",
    "NOT_MEASURED",
    "Fingerprint",
    "describe",
    "differing",
    "fingerprint",
    "show",
]
