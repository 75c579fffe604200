"""The run stream: typed records validated on read, write -> read round trip, and the
reader's robustness against everything a file on a shared file system can hold."""

from __future__ import annotations

import json
import threading
import time

import msgspec
import pytest
from support.records import as_json
from support.records import event as event_record
from support.records import final as final_record
from support.records import header as _header_record
from support.records import interval as interval_record

from esdash.bench.recorder import Recorder
from esdash.rundir.records import STREAM_SCHEMA as SCHEMA
from esdash.rundir.records import StreamRecord
from esdash.rundir.stream import StreamReader, StreamWriter
from esdash.stats.merge import merge_payloads


def header_record(**kwargs):
    kwargs["topology_"] = kwargs.pop("topology", None)
    return _header_record(**kwargs)


def validate(data) -> str:
    """The problem of a JSON value as a stream record ('' when it is a valid one)."""
    try:
        msgspec.json.decode(json.dumps(data), type=StreamRecord)
    except msgspec.ValidationError as exc:
        return str(exc)
    return ""


STARTED = 1_763_700_000.0


def _header(**changes):
    record = as_json(
        header_record(
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
    )
    record.update(changes)
    return record


def _ops(seed: int = 0):
    recorders = [Recorder(rank=r) for r in range(2)]
    for k in range(200):
        recorders[k % 2].record("age", "node-0", 0.001 + k * 1e-5, 0.001 + k * 1e-5, 10, 500)
    recorders[1].record_error("age", "node-0", "http_429", 429, "rejected", 0.0004)
    return as_json(merge_payloads(r.drain() for r in recorders).to_payload())["ops"]


def _interval(number: int, **changes):
    seq = number
    record = as_json(
        interval_record(
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


def _typed(data):
    """A JSON record as the writer takes it."""
    return msgspec.json.decode(json.dumps(data), type=StreamRecord)


def test_builders_make_valid_records():
    for record in _records():
        assert validate(as_json(record)) == "", record
    assert _header()["schema"] == SCHEMA


@pytest.mark.parametrize(
    ("record", "expected"),
    [
        ([1, 2], "Expected `object`, got `array`"),
        ({"type": "summary"}, "Invalid value 'summary' - at `$.type`"),
        ({k: v for k, v in _header().items() if k != "run_id"}, "missing required field `run_id`"),
        (_header(schema="esdash.stream/2"), "schema 'esdash.stream/2' is not"),
        (_header(interval=0), "Expected `float` > 0.0 - at `$.interval`"),
        (_header(started="yesterday"), "Expected `float`, got `str` - at `$.started`"),
        (_header(steps=[{"name": "x"}]), "missing required field `queries` - at `$.steps[0]`"),
        (_interval(0, phase="cooldown"), "Invalid enum value 'cooldown' - at `$.phase`"),
        (_interval(0, step=None), "step: a measure interval needs a step index"),
        (_interval(0, missing_ranks=["r1"]), "Expected `int`, got `str` - at `$.missing_ranks[0]`"),
        (_interval(0, seq=True), "Expected `int`, got `bool` - at `$.seq`"),
        (_interval(0, seq=-1), "Expected `int` >= 0 - at `$.seq`"),
        (
            _interval(0, ops={"age": {**_ops()["age"], "errors": {"http_5xx": 1}}}),
            "at `key` in `$.ops[...].errors`",
        ),
        (
            _interval(0, ops={"age": {**_ops()["age"], "latency": {"hdr": "HISTFx"}}}),
            "missing required field `count` - at `$.ops[...].latency`",
        ),
        (
            _interval(0, ops={"age": {**_ops()["age"], "requests": 0}}),
            "more errors (1) than requests (0) - at `$.ops[...]`",
        ),
        (as_json(final_record(t=1, wall=2, status="crashed")), "at `$.status`"),
        (
            as_json(event_record(t=1, wall=2, kind="Node Lost", message="x")),
            "at `$.kind`",
        ),
        (
            as_json(event_record(t=1, wall=2, kind="note", message="x", level="debug")),
            "Invalid enum value 'debug' - at `$.level`",
        ),
    ],
)
def test_validation_names_the_field(record, expected):
    assert expected in validate(record)


def test_not_a_number_is_refused():
    assert "at `$.t`" in validate({**_interval(0), "t": "NaN"})


def test_unknown_fields_and_minor_versions_are_accepted():
    assert validate(_header(schema=SCHEMA + ".3", future_field={"x": 1})) == ""
    assert validate(_interval(0, cluster={"status": "green"})) == ""


# ------------------------------------------------------------------ write and read


def test_round_trip(tmp_path):
    path = tmp_path / "stream.jsonl"
    records = _records()
    with StreamWriter(path) as writer:
        for record in records:
            writer.write(_typed(record) if isinstance(record, dict) else record)
    assert writer.records == len(records)
    lines = path.read_text().splitlines()
    assert len(lines) == len(records)  # one line per record
    reader = StreamReader(path)
    read = reader.read_all()
    assert [as_json(r) for r in read] == [
        as_json(_typed(r) if isinstance(r, dict) else r) for r in records
    ]
    assert reader.problems == []
    assert reader.header == read[0] and reader.finished and reader.final.status == "ok"
    assert reader.poll() == []  # nothing new


def test_writer_enforces_order_and_validity(tmp_path):
    path = tmp_path / "stream.jsonl"
    writer = StreamWriter(path)
    with pytest.raises(ValueError, match="first record must be the header"):
        writer.write(_typed(_interval(0)))
    writer.write(_typed(_header()))
    writer.write(final_record(t=1.0, wall=STARTED + 1, status="aborted", reason="SIGTERM"))
    with pytest.raises(ValueError, match="already has its final record"):
        writer.write(_typed(_interval(1)))
    writer.close()
    with pytest.raises(ValueError, match="closed"):
        writer.write(_typed(_interval(1)))
    assert [type(r).__name__ for r in StreamReader(path).read_all()] == ["Header", "Final"]


def test_missing_file_then_growth(tmp_path):
    path = tmp_path / "stream.jsonl"
    reader = StreamReader(path)
    assert reader.poll() == [] and not reader.exists
    assert reader.age() is None and reader.idle() is None
    writer = StreamWriter(path)
    writer.write(_typed(_header()))
    assert [type(r).__name__ for r in reader.poll()] == ["Header"] and reader.exists
    assert reader.poll() == []
    writer.write(_typed(_interval(0)))
    writer.write(_typed(_interval(1)))
    assert [r.seq for r in reader.poll()] == [0, 1]
    writer.close()


def test_truncated_last_line_waits_for_its_end(tmp_path):
    path = tmp_path / "stream.jsonl"
    header = json.dumps(_header()) + "\n"
    interval = json.dumps(_interval(0)) + "\n"
    path.write_text(header + interval[:100])  # the writer is mid-write
    reader = StreamReader(path)
    assert [type(r).__name__ for r in reader.poll()] == ["Header"]
    assert reader.partial_bytes == 100 and reader.problems == []
    with path.open("a") as handle:
        handle.write(interval[100:])
    assert [type(r).__name__ for r in reader.poll()] == ["Interval"]
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
    assert [type(r).__name__ for r in records] == ["Header", "Interval"]
    found = {problem.line: problem.message for problem in reader.problems}
    assert set(found) == {2, 3, 4, 5, 8}
    assert found[2].startswith("not JSON")
    assert found[3] == "not UTF-8 text"
    assert "Expected `object`, got `array`" in found[4]
    assert "missing required field" in found[5]
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
    assert [r.run_id for r in records] == ["other"]
    assert "shrank" in reader.problems[0].message


def test_writer_after_a_crash_mid_line_starts_a_new_line(tmp_path):
    path = tmp_path / "stream.jsonl"
    path.write_text(json.dumps(_header()) + "\n" + '{"type": "interval", "se')
    with StreamWriter(path) as writer:
        writer.write(_typed(_interval(0)))
    reader = StreamReader(path)
    assert [type(r).__name__ for r in reader.read_all()] == ["Header", "Interval"]
    assert [p.line for p in reader.problems] == [2]


def test_age_and_idle(tmp_path):
    path = tmp_path / "stream.jsonl"
    now = [50.0]
    reader = StreamReader(path, clock=lambda: now[0])
    with StreamWriter(path) as writer:
        writer.write(_typed(_header()))
        reader.poll()
        assert reader.age(now=STARTED + 10) == pytest.approx(10.0)  # header: started
        writer.write(_typed(_interval(4)))  # wall = STARTED + 5
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
            writer.write(_typed(record))
    reader = StreamReader(path, max_read=97)
    assert [type(r).__name__ for r in reader.read_all()] == ["Header"] + ["Interval"] * 5
    assert reader.problems == []


def test_reader_following_a_live_writer_sees_each_record_once_in_order(tmp_path):
    """A real writer thread appends while the reader polls: no loss, no duplicates."""
    path = tmp_path / "stream.jsonl"
    count = 60

    def produce():
        with StreamWriter(path, fsync=False) as writer:
            writer.write(_typed(_header()))
            for seq in range(count):
                writer.write(_typed(_interval(seq)))
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
    assert [r.seq for r in seen if type(r).__name__ == "Interval"] == list(range(count))
    assert type(seen[0]).__name__ == "Header" and type(seen[-1]).__name__ == "Final"
