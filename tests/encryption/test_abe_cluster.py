"""ABE end to end: `esdash run` against real Elasticsearch and MPI ranks, plaintext vs ABE.

One small MRI corpus with planted plaintext markers is run twice, each time on a fresh
one-node cluster (own data directory): with ``mode = "none"`` and with ``mode = "abe"``.
The benchmark talks to the node through a recording TCP proxy, so the test sees every byte
esdash sent (index creation, bulk bodies, searches).  Then:

- both runs measure the supported queries; ABE reports the paper's two "-" queries as not
  possible under ABE;
- the encoded queries of the ABE run hit exactly as many documents as the plaintext queries
  on the plaintext cluster; documents, min/max and sort values read back through the codec
  are the originals;
- leak test: the markers are in the plaintext run's HTTP payloads and data directory
  (positive control) and nowhere in the ABE run's; the key is nowhere in either.
"""

from __future__ import annotations

import base64
import contextlib
import http.client
import json
import os
import random
import socket
import threading
from pathlib import Path

import pytest
from esdash_plugins.encryption.abe import AbeMode
from esdash_plugins.tracks.mri import QUERIES, generate
from pyope.ope import OPE
from support.cli import esdash, java_pids_under, run_dir_from, write_session

from esdash.plugin.corpus import generated_corpus
from esdash.rundir.layout import RunDir

pytestmark = [pytest.mark.es, pytest.mark.mpi]

DOCUMENTS = 2000
SEED = random.Random().randrange(10**6, 10**7)
BENCH = '[benchmark]\nworkers_per_node = 1\nwarmup = "1s"\nduration = "2s"\nbulk_size = 250\n'
SUPPORTED = ("body_part", "vendor", "age", "body_part_resolution", "vendor_body_part")
MARKER_TEXT = "QZXJMARKERTEXT7731"
MARKER_NAME = "Qvxmarkername"
MARKER_WEIGHT = 123.4567
MARKERS = {
    "text value": MARKER_TEXT.encode(),
    "keyword value": MARKER_NAME.encode(),
    "number": b"123.4567",
    "field name": b"ismrmrdHeader",
}


class RecordingProxy:
    """A TCP forwarder that keeps every byte the clients sent (plain HTTP, security off)."""

    def __init__(self, upstream: tuple[str, int]) -> None:
        self.upstream = upstream
        self.sent = bytearray()
        self.lock = threading.Lock()
        self.server = socket.create_server(("127.0.0.1", 0))
        self.port = self.server.getsockname()[1]
        threading.Thread(target=self._accept, daemon=True).start()

    def _accept(self) -> None:
        while True:
            try:
                client, _ = self.server.accept()
            except OSError:
                return
            upstream = socket.create_connection(self.upstream)
            threading.Thread(target=self._pump, args=(client, upstream, True), daemon=True).start()
            threading.Thread(target=self._pump, args=(upstream, client, False), daemon=True).start()

    def _pump(self, source: socket.socket, target: socket.socket, record: bool) -> None:
        try:
            while data := source.recv(65536):
                if record:
                    with self.lock:
                        self.sent += data
                target.sendall(data)
        except OSError:
            pass
        finally:
            for sock in (source, target):
                with contextlib.suppress(OSError):
                    sock.shutdown(socket.SHUT_RDWR)

    def close(self) -> None:
        self.server.close()


def request(address: str, port: int, method: str, path: str, body: object = None) -> dict:
    connection = http.client.HTTPConnection(address, port, timeout=120)
    payload = json.dumps(body).encode() if body is not None else None
    connection.request(method, path, payload, {"Content-Type": "application/json"})
    response = connection.getresponse()
    data = response.read()
    connection.close()
    assert response.status < 300, data[:500]
    return json.loads(data)


def tree_bytes(root: Path) -> bytes:
    chunks = []
    for path in sorted(root.rglob("*")):
        if path.is_file() and not path.is_symlink():
            chunks.append(path.read_bytes())
    return b"\n".join(chunks)


@pytest.fixture(scope="module")
def setup(shared_tmp: Path, es_home: Path):
    """The marked corpus in an isolated esdash cache, a private key, the environment."""
    cache = shared_tmp / "abe-cache"
    docs = list(generate(DOCUMENTS, SEED))
    # Every 50th document: Lucene compresses stored fields in chunks (LZ4), and a marker is
    # kept as a literal only where no earlier bytes of its chunk match part of it; spread
    # over every chunk, the plaintext positive control finds it reliably.
    for k in range(5, DOCUMENTS, 50):
        docs[k]["ismrmrdHeader"] = f"abc {MARKER_TEXT} def"
        docs[k + 1]["PatientName"] = MARKER_NAME
        docs[k + 2]["PatientWeight"] = MARKER_WEIGHT
    generated_corpus(cache / "corpora" / f"mri-{DOCUMENTS}-{SEED}.ndjson", docs, DOCUMENTS)
    key_text = OPE.generate_key()  # pyope-style base64 text: easy to search for
    key = shared_tmp / "abe.key"
    key.write_bytes(key_text)
    key.chmod(0o600)
    env = {**os.environ, "ESDASH_CACHE": str(cache)}
    return {"docs": docs, "key": key, "key_text": key_text, "env": env, "home": es_home}


def run_mode(shared_tmp: Path, setup: dict, name: str, encryption: str, checks) -> dict:
    """Cluster up, `esdash run --cluster` through the proxy, ``checks`` while up, down."""
    runs = shared_tmp / "runs"
    session = write_session(
        shared_tmp,
        name,
        1,
        security=False,
        extra_cluster=f'home = "{setup["home"]}"',
        track=f'name = "mri"\ndocuments = {DOCUMENTS}\nseed = {SEED}',
        tables=f"[encryption]\n{encryption}\n{BENCH}",
    )
    env = setup["env"]
    cluster = run_dir_from(esdash("cluster", "up", str(session), env_runs=runs, env=env).stdout)
    topology_file = cluster / "topology.json"
    original = topology_file.read_text()
    node = json.loads(original)["nodes"][0]
    upstream = (node["address"], node["http_port"])
    proxy = RecordingProxy(upstream)
    outcome: dict = {"cluster": cluster}
    try:
        patched = json.loads(original)
        patched["nodes"][0]["address"], patched["nodes"][0]["http_port"] = "127.0.0.1", proxy.port
        topology_file.write_text(json.dumps(patched))
        result = esdash(
            "run", str(session), "--cluster", str(cluster), "--reingest",
            env_runs=runs, env=env, timeout=900, check=False,
        )  # fmt: skip
        topology_file.write_text(original)
        assert result.returncode == 0, result.stdout + result.stderr
        outcome["stdout"] = result.stdout
        run = next(
            Path(line.split(": ", 1)[1]).parent
            for line in result.stdout.splitlines()
            if line.startswith("results: ")
        )
        outcome["run"] = run
        outcome["results"] = json.loads((run / "results.json").read_text())
        outcome["plan"] = json.loads((run / "bench.json").read_text())
        request(*upstream, "POST", "/mri/_refresh")
        outcome.update(checks(upstream, outcome))
    finally:
        topology_file.write_text(original)
        proxy.close()
        esdash("cluster", "down", str(cluster), env_runs=runs, env=env)
    assert java_pids_under(cluster) == []
    outcome["sent"] = bytes(proxy.sent)
    outcome["data"] = tree_bytes(shared_tmp / f"data-{name}")
    return outcome


@pytest.fixture(scope="module")
def plaintext(shared_tmp: Path, setup: dict) -> dict:
    def checks(upstream, outcome) -> dict:
        counts = {
            q.name: request(*upstream, "POST", "/mri/_count", {"query": q.body["query"]})["count"]
            for q in QUERIES
            if q.name in SUPPORTED
        }
        return {"counts": counts}

    return run_mode(shared_tmp, setup, "abeplain", 'mode = "none"', checks)


@pytest.fixture(scope="module")
def encrypted(shared_tmp: Path, setup: dict) -> dict:
    def checks(upstream, outcome) -> dict:
        plan = outcome["plan"]
        codec = AbeMode().codec_from_spec(plan["client_codec"])
        queries = {q["name"]: q for step in plan["steps"] for q in step["queries"]}
        counts = {
            name: request(
                *upstream, "POST", "/mri/_count", {"query": queries[name]["body"]["query"]}
            )["count"]
            for name in SUPPORTED
        }
        everything = request(
            *upstream, "POST", "/mri/_search", {"size": DOCUMENTS, "query": {"match_all": {}}}
        )
        docs = [h["_source"] for h in codec.decode_response(everything)["hits"]["hits"]]
        body = codec.encode_query(
            {
                "size": 5,
                "sort": [{"PatientWeight": "desc"}],
                "aggs": {
                    "youngest": {"min": {"field": "PatientAge"}},
                    "latest": {"max": {"field": "StudyDate"}},
                },
            }
        )
        sorted_hits = codec.decode_response(request(*upstream, "POST", "/mri/_search", body), body)
        return {"counts": counts, "docs": docs, "sorted": sorted_hits}

    tables = f'mode = "abe"\nkey_file = "{setup["key"]}"'
    return run_mode(shared_tmp, setup, "abeenc", tables, checks)


def test_both_runs_measure_the_supported_queries(plaintext: dict, encrypted: dict) -> None:
    for outcome, mode in ((plaintext, "none"), (encrypted, "abe")):
        results = outcome["results"]
        assert results["status"] == "ok" and results["encryption"] == mode
        assert results["ingest"]["docs_sent"] == DOCUMENTS
        assert results["ingest"]["docs_rejected"] == 0
        steps = {s["name"]: s for s in results["steps"]}
        for name in SUPPORTED:
            query = steps[name]["queries"][name]
            assert query["requests"] > 0 and query["errors"] == {}, (mode, name)
        assert f", encryption {mode}" in outcome["stdout"]
    assert encrypted["results"]["ingest"]["encode_seconds"] > 0


def test_the_abe_run_writes_its_leakage_report_and_the_plaintext_run_none(
    plaintext: dict, encrypted: dict
) -> None:
    report = RunDir(encrypted["run"]).read_leakage()  # parses: the typed record
    assert report is not None and report.documents > 0 and report.fields
    assert {item.field for item in report.fields} >= {"PatientAge", "PatientName"}
    lines = encrypted["stdout"].splitlines()
    begins = next(k for k, line in enumerate(lines) if line.startswith("leakage analysis begins ("))
    assert lines[begins + 1] == f"leakage: {RunDir(encrypted['run']).leakage_file}"
    assert RunDir(plaintext["run"]).read_leakage() is None
    assert "leakage" not in plaintext["stdout"]


def test_abe_reports_the_papers_dashes(encrypted: dict) -> None:
    steps = {s["name"]: s for s in encrypted["results"]["steps"]}
    for name, part in (
        ("brain_age", "query.bool.filter.script"),
        ("age_weight", "aggs.weight.histogram"),
    ):
        assert steps[name]["status"].startswith(f"not run: not possible under ABE: {part}")
        assert f"{name}/{name}: not run: not possible under ABE: {part}" in encrypted["stdout"]


def test_encrypted_queries_hit_as_many_documents(plaintext: dict, encrypted: dict) -> None:
    assert all(count > 0 for count in plaintext["counts"].values())
    assert encrypted["counts"] == plaintext["counts"]


def test_documents_and_aggregations_decode_to_the_originals(setup: dict, encrypted: dict):
    key = lambda doc: json.dumps(doc, sort_keys=True)  # noqa: E731
    assert sorted(map(key, encrypted["docs"])) == sorted(map(key, setup["docs"]))
    response = encrypted["sorted"]
    weights = sorted((d["PatientWeight"] for d in setup["docs"]), reverse=True)[:5]
    assert [h["sort"][0] for h in response["hits"]["hits"]] == weights
    assert [h["_source"]["PatientWeight"] for h in response["hits"]["hits"]] == weights
    aggs = response["aggregations"]
    assert aggs["youngest"]["value"] == min(d["PatientAge"] for d in setup["docs"])
    assert aggs["latest"]["value_as_string"] == max(d["StudyDate"] for d in setup["docs"])


def test_plaintext_markers_never_leave_the_client_under_abe(plaintext: dict, encrypted: dict):
    # positive control: the scans do find the markers where data is plaintext
    for what, marker in MARKERS.items():
        assert marker in plaintext["sent"], f"{what} not in the plaintext run's payloads"
        assert marker in plaintext["data"], f"{what} not in the plaintext data directory"
    assert b"/_bulk" in encrypted["sent"] and b"/_search" in encrypted["sent"]
    assert len(encrypted["data"]) > 100_000
    for what, marker in MARKERS.items():
        assert marker not in encrypted["sent"], f"{what} in the ABE run's HTTP payloads"
        assert marker not in encrypted["data"], f"{what} in the ABE data directory"


def test_the_key_is_nowhere(setup: dict, plaintext: dict, encrypted: dict) -> None:
    text = setup["key_text"]
    raw = base64.b64decode(text)
    for outcome in (plaintext, encrypted):
        blobs = [outcome["sent"], outcome["data"], tree_bytes(outcome["run"])]
        blobs.append(tree_bytes(outcome["cluster"]))
        for blob in blobs:
            assert text not in blob and raw not in blob
