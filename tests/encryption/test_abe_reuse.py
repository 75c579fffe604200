"""ABE index reuse against a real node: the paper-small campaign's ``InvalidTag``.

In that campaign a 1-node ABE point created and ingested index ``mri``; later points ran
``esdash run --cluster`` on the same data and reused it, because its mapping ``_meta`` (key
fingerprint, key mode, field plans) was the planned one.  But the string ciphers had changed
their associated data in between: the ``body_part`` and ``vendor`` terms matched nothing,
and the first query whose hits carried strings, ``age`` (a range over OPE numbers, whose
format had not changed), failed its warm-up with a bare ``InvalidTag`` on every rank.

Here one node holds an index written in that earlier format (:mod:`support.abe`), and a
session running ``body_part`` and ``age`` with two workers, like the failing points:

- with the earlier format's own ``_meta`` the index must be re-created, not reused;
- with the planned ``_meta`` (the fingerprint ``esdash run`` stamps, ABE layout included)
  over foreign strings (another writer), the run must fail naming the query, the field and
  the fix, not with a bare ``InvalidTag``.
"""

from __future__ import annotations

import http.client
import json
import os
import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from esdash_plugins.encryption.abe import AbeMode
from esdash_plugins.tracks.mri import QUERIES, MriTrack, generate
from support.abe import older_format
from support.cli import esdash, java_pids_under, run_dir_from, write_session

from esdash.plugin.index_stamp import corpus_identity, stamp_index_body

pytestmark = [pytest.mark.es, pytest.mark.mpi]

DOCUMENTS = 300
SEED = 5
TRACK_OPTIONS = {"documents": DOCUMENTS, "seed": SEED, "shards": 1}
STEPS = ("body_part", "age")
BENCH = (
    '[benchmark]\nworkers_per_node = 2\nwarmup = "1s"\nduration = "1s"\nbulk_size = 100\n'
    'queries = "{steps}"\n'
)


def call(node: dict, method: str, path: str, body: bytes | None = None) -> dict:
    """One request to the node (security off); fails the test on an HTTP error."""
    connection = http.client.HTTPConnection(node["address"], node["http_port"], timeout=120)
    kind = "application/x-ndjson" if "/_bulk" in path else "application/json"
    connection.request(method, path, body, {"Content-Type": kind})
    response = connection.getresponse()
    data = response.read()
    connection.close()
    assert response.status < 300, data[:500]
    return json.loads(data)


@pytest.fixture(scope="module")
def reuse(shared_tmp: Path, es_home: Path) -> Iterator[dict[str, Any]]:
    """One node, a key, a session of the two steps; the plan's codec.  Down at the end."""
    key = shared_tmp / "reuse.key"
    key.write_bytes(os.urandom(32))
    key.chmod(0o600)
    steps = shared_tmp / "reuse-steps.json"
    chosen = [q for q in QUERIES if q.name in STEPS]
    steps.write_text(
        json.dumps(
            [{"name": q.name, "search_queries": [{"name": q.name, "body": q.body}]} for q in chosen]
        )
    )
    options = "\n".join(f"{k} = {v}" for k, v in TRACK_OPTIONS.items())
    session = write_session(
        shared_tmp,
        "abereuse",
        1,
        security=False,
        extra_cluster=f'home = "{es_home}"',
        track=f'name = "mri"\n{options}',
        tables=f'[encryption]\nmode = "abe"\nkey_file = "{key}"\n{BENCH.format(steps=steps)}',
    )
    env = {**os.environ, "ESDASH_CACHE": str(shared_tmp / "reuse-cache")}
    runs = shared_tmp / "reuse-runs"
    cluster = run_dir_from(esdash("cluster", "up", str(session), env_runs=runs, env=env).stdout)
    try:
        yield {
            "session": session,
            "cluster": cluster,
            "env": env,
            "runs": runs,
            "node": json.loads((cluster / "topology.json").read_text())["nodes"][0],
            "codec": AbeMode().client_codec(
                {"key_file": key}, MriTrack(), track_options=TRACK_OPTIONS
            ),
            "index_body": MriTrack().index_body(TRACK_OPTIONS),
            "docs": list(generate(DOCUMENTS, SEED)),
        }
    finally:
        esdash("cluster", "down", str(cluster), env_runs=runs, env=env)
    assert java_pids_under(cluster) == []


def seed_index(node: dict, body: dict, lines: list[bytes]) -> None:
    """Leave index ``mri`` as an earlier run would have: ``body``, then ``lines``, refreshed."""
    indices = call(node, "GET", "/_cat/indices?format=json")
    if any(entry["index"] == "mri" for entry in indices):
        call(node, "DELETE", "/mri")
    call(node, "PUT", "/mri", json.dumps(body).encode())
    bulk = b"".join(b'{"index":{}}\n' + line + b"\n" for line in lines)
    assert not call(node, "POST", "/mri/_bulk?refresh=true", bulk)["errors"]


def planned_body(reuse: dict, encrypted: bool = True) -> dict:
    """The index body ``esdash run`` plans: the codec's, stamped with its ``_meta.esdash``.

    ``encrypted=False``: what a plaintext session of the same track and corpus plans.
    """
    cache = Path(reuse["env"]["ESDASH_CACHE"])
    corpus = MriTrack().corpus(TRACK_OPTIONS, cache / "corpora")
    body = reuse["index_body"]
    if encrypted:
        body = reuse["codec"].encode_index_body(body)
    return stamp_index_body(body, corpus_identity(corpus, cache / "offsets"))


def bench(reuse: dict) -> tuple[str, dict]:
    """``esdash run --cluster`` without ``--reingest``, as the campaign's later points ran."""
    result = esdash(
        "run", str(reuse["session"]), "--cluster", str(reuse["cluster"]),
        env_runs=reuse["runs"], env=reuse["env"], timeout=600, check=False,
    )  # fmt: skip
    output = result.stdout + result.stderr
    found = [line for line in result.stdout.splitlines() if line.startswith("results: ")]
    assert found, output
    return output, json.loads(Path(found[0].split(": ", 1)[1]).read_text())


def test_an_index_in_another_ciphertext_format_is_recreated_not_reused(reuse: dict) -> None:
    older = older_format(reuse["codec"].spec())
    body = older.encode_index_body(reuse["index_body"])
    seed_index(reuse["node"], body, older.encode_lines([dict(d) for d in reuse["docs"]]))
    output, results = bench(reuse)
    assert "index mri created" in output, output
    assert results["status"] == "ok", output
    steps = {step["name"]: step for step in results["steps"]}
    for name in STEPS:
        query = steps[name]["queries"][name]
        # hits, all decoded: the terms match what this run ingested
        assert query["requests"] > 0 and query["docs"] > 0 and query["errors"] == {}, name


def test_foreign_strings_under_the_planned_meta_name_query_field_and_fix(reuse: dict) -> None:
    older = older_format(reuse["codec"].spec())
    body = planned_body(reuse)
    seed_index(reuse["node"], body, older.encode_lines([dict(d) for d in reuse["docs"]]))
    output, results = bench(reuse)
    assert f"index mri reused with {DOCUMENTS} documents" in output, output
    assert results["status"] == "failed", output
    failures = {step["name"]: step.get("warmup_failed") for step in results["steps"]}
    assert failures["body_part"] is None  # its term matches no foreign string: no hits
    assert sorted(failures["age"]) == ["1", "2"], output
    for message in failures["age"].values():
        assert re.search(
            r"warm-up of query 'age' failed: ForeignCiphertext: field \w+: the stored value",
            message,
        ), message
        assert "esdash run --reingest" in message, message


def test_a_plaintext_index_of_the_same_corpus_is_recreated_naming_the_abe_layout(
    reuse: dict,
) -> None:
    lines = [json.dumps(d).encode() for d in reuse["docs"]]
    seed_index(reuse["node"], planned_body(reuse, encrypted=False), lines)
    output, results = bench(reuse)
    assert "index mri created anew: the existing one differed in" in output, output
    assert "ABE layout (the index is plaintext)" in output, output
    assert results["status"] == "ok", output
