"""The run stream: schema validation, write -> read round trip, and the reader's robustness."""

from __future__ import annotations

import json
import threading
import time

import pytest

from esdash.bench.merge import merge_payloads
from esdash.bench.recorder import Recorder
from esdash.stream.reader import StreamReader
from esdash.stream.schema import (
    SCHEMA,
    event_record,
    final_record,
    header_record,
    interval_record,
    validate_record,
)
from esdash.stream.writer import StreamWriter

STARTED = 1_763_700_000.0


def _header(**changes):
    record = header_record(
        run_id="demo-20261121-031000",
        session={"name": "demo", "bench": {"workers_per_node": 2}},
        plugins={"esdash": "0.1.0", "track-mri": "0.1.0"},
        topology={"nodes": [{"name": "node-0", "host": "c1", "address": "10.0.0.1"}]},
        bench_ranks=[
            {"rank": 0, "host": "c1", "target": "node-0"},
            {"rank": 1, "host": "c1", "target": "node-0"},
        ],
        slurm_job_id="4242",
        started=STARTED,
        interval=1.0,
        steps=[
            {"name": "match_all", "queries": ["all"], "warmup": 5, "duration": 30},
            {
                "name": "paced",
                "queries": ["age", "range"],
                "warmup": 5,
                "duration": 30,
                "target_throughput": 100.0,
            },
        ],
        docs_total=10_000,
    )
    record.update(changes)
    return record


def _ops(seed: int = 0):
    recorders = [Recorder(rank=r) for r in range(2)]
    for k in range(200):
        recorders[k % 2].record("age", "node-0", 0.001 + k * 1e-5, 0.001 + k * 1e-5, 10, 500)
    recorders[1].record_error("age", "node-0", "http_429", 429, "rejected", 0.0004)
    return merge_payloads(r.drain() for r in recorders).to_payload()["ops"]


def _interval(number: int, **changes):
    seq = number
    record = interval_record(
        seq=seq,
        t=float(seq + 1),
        wall=STARTED + seq + 1,
        phase="measure",
        step=0,
        step_name="match_all",
        elapsed=1.0,
        ops=_ops(seq),
        ranks=[1, 0],
        missing_ranks=[],
    )
    record.update(changes)
    return record


def _records():
    return [
        _header(),
        interval_record(
            seq=0,
            t=1.0,
            wall=STARTED + 1,
            phase="ingest",
            step=None,
            step_name=None,
            elapsed=1.0,
            ops={},
            ranks=[0],
            missing_ranks=[1],
            docs_done=5000,
            docs_total=10_000,
        ),
        event_record(
            t=1.5,
            wall=STARTED + 1.5,
            kind="phase",
            message="step 1/2 match_all: warm-up",
            step=0,
            data={"phase": "warmup", "step": 0},
        ),
        _interval(1),
        event_record(
            t=2.5,
            wall=STARTED + 2.5,
            kind="node_lost",
            level="warning",
            message="node-1 stopped answering",
            data={"node": "node-1"},
        ),
        final_record(t=3.0, wall=STARTED + 3.0, status="ok"),
    ]


# ------------------------------------------------------------------------- schema


def test_builders_make_valid_records():
    for record in _records():
        assert validate_record(record) == [], record["type"]
    assert _header()["schema"] == SCHEMA


@pytest.mark.parametrize(
    ("record", "expected"),
    [
        ([1, 2], "expected a JSON object"),
        ({"type": "summary"}, "type: 'summary' is not one of"),
        ({k: v for k, v in _header().items() if k != "run_id"}, "run_id: missing"),
        (_header(schema="esdash.stream/2"), "schema: 'esdash.stream/2' is not"),
        (_header(interval=0), "interval: must be positive"),
        (_header(started="yesterday"), "started: expected a number"),
        (_header(steps=[{"name": "x"}]), "steps[0].queries: missing"),
        (_interval(0, phase="cooldown"), "phase: 'cooldown' is not one of"),
        (_interval(0, step=None), "step: a measure interval needs a step index"),
        (_interval(0, missing_ranks=["r1"]), "missing_ranks: expected a list of rank numbers"),
        (_interval(0, seq=True), "seq: expected an integer"),
        (_interval(0, t=float("nan")), "t: expected a number"),
        (
            _interval(0, ops={"age": {**_ops()["age"], "errors": {"http_5xx": 1}}}),
            "ops.age.errors.http_5xx: not an error class",
        ),
        (
            _interval(0, ops={"age": {**_ops()["age"], "latency": {"hdr": "x"}}}),
            "ops.age.latency.count: missing",
        ),
        (
            _interval(0, ops={"age": {**_ops()["age"], "requests": 0}}),
            "ops.age: more errors (1) than requests (0)",
        ),
        (final_record(t=1, wall=2, status="crashed"), "status: 'crashed' is not one of"),
        (event_record(t=1, wall=2, kind="Node Lost", message="x"), "kind: 'Node Lost'"),
        (event_record(t=1, wall=2, kind="note", message="x", level="debug"), "level: 'debug'"),
    ],
)
def test_validation_names_the_field(record, expected):
    problems = validate_record(record)
    assert any(expected in problem for problem in problems), problems


def test_unknown_fields_and_minor_versions_are_accepted():
    assert validate_record(_header(schema=SCHEMA + ".3", future_field={"x": 1})) == []
    assert validate_record(_interval(0, cluster={"status": "green"})) == []


# ------------------------------------------------------------------ write and read


def test_round_trip(tmp_path):
    path = tmp_path / "stream.jsonl"
    records = _records()
    with StreamWriter(path) as writer:
        for record in records:
            writer.write(record)
    assert writer.records == len(records)
    lines = path.read_text().splitlines()
    assert len(lines) == len(records)  # one line per record
    reader = StreamReader(path)
    read = reader.read_all()
    assert read == json.loads(json.dumps(records))
    assert reader.problems == []
    assert reader.header == read[0] and reader.finished and reader.final["status"] == "ok"
    assert all(validate_record(record) == [] for record in read)
    assert reader.poll() == []  # nothing new


def test_writer_enforces_order_and_validity(tmp_path):
    path = tmp_path / "stream.jsonl"
    writer = StreamWriter(path)
    with pytest.raises(ValueError, match="first record must be the header"):
        writer.write(_interval(0))
    writer.write(_header())
    with pytest.raises(ValueError, match="ops.age.latency.count: missing"):
        writer.write(_interval(0, ops={"age": {**_ops()["age"], "latency": {"hdr": "x"}}}))
    with pytest.raises(ValueError):
        writer.write(_interval(0, elapsed=float("inf")))  # no NaN/Infinity in the stream
    writer.write(final_record(t=1.0, wall=STARTED + 1, status="aborted", reason="SIGTERM"))
    with pytest.raises(ValueError, match="already has its final record"):
        writer.write(_interval(1))
    writer.close()
    with pytest.raises(ValueError, match="closed"):
        writer.write(_interval(1))
    assert [r["type"] for r in StreamReader(path).read_all()] == ["header", "final"]


def test_missing_file_then_growth(tmp_path):
    path = tmp_path / "stream.jsonl"
    reader = StreamReader(path)
    assert reader.poll() == [] and not reader.exists
    assert reader.age() is None and reader.idle() is None
    writer = StreamWriter(path)
    writer.write(_header())
    assert [r["type"] for r in reader.poll()] == ["header"] and reader.exists
    assert reader.poll() == []
    writer.write(_interval(0))
    writer.write(_interval(1))
    assert [r["seq"] for r in reader.poll()] == [0, 1]
    writer.close()


def test_truncated_last_line_waits_for_its_end(tmp_path):
    path = tmp_path / "stream.jsonl"
    header = json.dumps(_header()) + "\n"
    interval = json.dumps(_interval(0)) + "\n"
    path.write_text(header + interval[:100])  # the writer is mid-write
    reader = StreamReader(path)
    assert [r["type"] for r in reader.poll()] == ["header"]
    assert reader.partial_bytes == 100 and reader.problems == []
    with path.open("a") as handle:
        handle.write(interval[100:])
    assert [r["type"] for r in reader.poll()] == ["interval"]
    assert reader.partial_bytes == 0 and reader.problems == []


def test_read_all_reports_a_line_the_writer_never_finished(tmp_path):
    path = tmp_path / "stream.jsonl"
    path.write_text(json.dumps(_header()) + "\n" + json.dumps(_interval(0))[:50])
    reader = StreamReader(path)
    assert len(reader.read_all()) == 1
    assert len(reader.problems) == 1
    assert reader.problems[0].line == 2 and "truncated" in reader.problems[0].message


def test_garbage_lines_are_reported_and_skipped(tmp_path):
    path = tmp_path / "stream.jsonl"
    lines = [
        json.dumps(_header()).encode(),
        b"this is not json",
        b"\xff\xfe not utf-8",
        b"[1, 2, 3]",
        json.dumps({"type": "interval", "seq": 0}).encode(),
        b"",
        json.dumps(_interval(0)).encode(),
        json.dumps(_header()).encode(),
    ]
    path.write_bytes(b"\n".join(lines) + b"\n")
    reader = StreamReader(path)
    records = reader.poll()
    assert [r["type"] for r in records] == ["header", "interval"]
    found = {problem.line: problem.message for problem in reader.problems}
    assert set(found) == {2, 3, 4, 5, 8}
    assert found[2].startswith("not JSON")
    assert found[3] == "not UTF-8 text"
    assert "expected a JSON object" in found[4]
    assert "t: missing" in found[5]
    assert "second header" in found[8]
    assert reader.new_problems() == reader.problems and reader.new_problems() == []
    assert "line 2" in str(reader.problems[0])


def test_a_record_before_the_header_is_kept_but_reported(tmp_path):
    path = tmp_path / "stream.jsonl"
    path.write_text(json.dumps(_interval(0)) + "\n")
    reader = StreamReader(path)
    assert len(reader.poll()) == 1
    assert "before the header" in reader.problems[0].message


def test_a_file_that_shrank_is_read_again(tmp_path):
    path = tmp_path / "stream.jsonl"
    path.write_text(json.dumps(_header()) + "\n" + json.dumps(_interval(0)) + "\n")
    reader = StreamReader(path)
    assert len(reader.poll()) == 2
    path.write_text(json.dumps(_header(run_id="other")) + "\n")
    records = reader.poll()
    assert [r["run_id"] for r in records] == ["other"]
    assert "shrank" in reader.problems[0].message


def test_writer_after_a_crash_mid_line_starts_a_new_line(tmp_path):
    path = tmp_path / "stream.jsonl"
    path.write_text(json.dumps(_header()) + "\n" + '{"type": "interval", "se')
    with StreamWriter(path) as writer:
        writer.write(_interval(0))
    reader = StreamReader(path)
    assert [r["type"] for r in reader.read_all()] == ["header", "interval"]
    assert [p.line for p in reader.problems] == [2]


def test_age_and_idle(tmp_path):
    path = tmp_path / "stream.jsonl"
    now = [50.0]
    reader = StreamReader(path, clock=lambda: now[0])
    with StreamWriter(path) as writer:
        writer.write(_header())
        reader.poll()
        assert reader.age(now=STARTED + 10) == pytest.approx(10.0)  # header: started
        writer.write(_interval(4))  # wall = STARTED + 5
        reader.poll()
    assert reader.age(now=STARTED + 8) == pytest.approx(3.0)
    assert reader.idle() == 0.0
    now[0] = 57.5
    assert reader.poll() == [] and reader.idle() == pytest.approx(7.5)


def test_small_reads_still_deliver_every_record(tmp_path):
    path = tmp_path / "stream.jsonl"
    records = [_header()] + [_interval(seq) for seq in range(5)]
    with StreamWriter(path) as writer:
        for record in records:
            writer.write(record)
    reader = StreamReader(path, max_read=97)
    assert [r["type"] for r in reader.read_all()] == ["header"] + ["interval"] * 5
    assert reader.problems == []


def test_reader_following_a_live_writer_sees_each_record_once_in_order(tmp_path):
    """A real writer thread appends while the reader polls: no loss, no duplicates."""
    path = tmp_path / "stream.jsonl"
    count = 60

    def produce():
        with StreamWriter(path, fsync=False) as writer:
            writer.write(_header())
            for seq in range(count):
                writer.write(_interval(seq))
                time.sleep(0.001)
            writer.write(final_record(t=99.0, wall=STARTED + 99, status="ok"))

    thread = threading.Thread(target=produce)
    reader = StreamReader(path, max_read=4096)
    seen = []
    thread.start()
    deadline = time.monotonic() + 30
    while not reader.finished and time.monotonic() < deadline:
        seen.extend(reader.poll())
        time.sleep(0.002)
    thread.join()
    assert reader.problems == []
    assert [r.get("seq") for r in seen if r["type"] == "interval"] == list(range(count))
    assert seen[0]["type"] == "header" and seen[-1]["type"] == "final"
