"""Issue 28, L4: server error text is kept without the document values it quotes.

The engines quote the offending value in many reasons ("Preview of field's value: '...'");
those reasons go to ``results.json``, the stream and the summary.  The messages here are the
engines' own formats (Elasticsearch 8.19's and OpenSearch 3.4's message templates, from
their jars; Jackson's and Java's parser messages), each holding a value the test then must
not find.  The end-to-end case runs the real ingest loop and recorder against a local HTTP
server that rejects documents the way Elasticsearch does, and the real control-error path.
"""

from __future__ import annotations

import http.server
import json
import threading
from collections.abc import Iterator

import pytest
from support.records import header

from esdash.bench import loadgen
from esdash.bench.recorder import Recorder
from esdash.bench.rejections import ingest_flag
from esdash.bench.results import RunAccumulator, build_results
from esdash.bench.slices import Batch
from esdash.cluster.http import Connection, Target
from esdash.plugin.control import ControlError
from esdash.plugin.redaction import REDACTED, redact_values
from esdash.rundir import files
from esdash.rundir.records import Final

SECRET = "Jane-Doe-1961"

#: (message holding SECRET, what must be kept of it)
ECHOES = [
    (  # Elasticsearch 8: DocumentParsingException, with its [line:column]
        f"document_parsing_exception: [1:40] failed to parse field [PatientAge] of type [long] "
        f"in document with id 'p-{SECRET}'. Preview of field's value: '{SECRET}'",
        "document_parsing_exception: [1:40] failed to parse field [PatientAge] of type [long] "
        f"in document with id {REDACTED}. Preview of field's value: {REDACTED}",
    ),
    (  # OpenSearch: MapperParsingException, a value holding a quote and a dot
        f"mapper_parsing_exception: failed to parse field [name] of type [long] in document "
        f"with id 'x'. Preview of field's value: 'O'Brien. {SECRET}'",
        "mapper_parsing_exception: failed to parse field [name] of type [long] in document "
        f"with id {REDACTED}. Preview of field's value: {REDACTED}",
    ),
    (  # no preview: the id alone
        f"failed to parse field [a] of type [b] in document with id '{SECRET}'. Could not parse "
        "field value preview,",
        f"failed to parse field [a] of type [b] in document with id {REDACTED}. Could not parse "
        "field value preview,",
    ),
    (
        f"illegal_argument_exception: Value [{SECRET}] is out of range for a long",
        f"illegal_argument_exception: Value [{REDACTED}] is out of range for a long",
    ),
    (
        f"Value [1.5{SECRET}] has a decimal part",
        f"Value [{REDACTED}] has a decimal part",
    ),
    (
        f"illegal_argument_exception: '{SECRET}' is not an IP string literal.",
        f"illegal_argument_exception: {REDACTED} is not an IP string literal.",
    ),
    (
        f"parse_exception: failed to parse date field [{SECRET}] with format "
        "[strict_date_optional_time||epoch_millis]",
        f"parse_exception: failed to parse date field [{REDACTED}] with format "
        "[strict_date_optional_time||epoch_millis]",
    ),
    (
        f"illegal_argument_exception: Failed to parse value [{SECRET}] as only [true] or "
        "[false] are allowed.",
        f"illegal_argument_exception: Failed to parse value [{REDACTED}] as only [true] or "
        "[false] are allowed.",
    ),
    (
        'illegal_argument_exception: Document contains at least one immense term in field="n" '
        "(whose UTF8 encoding is longer than the max length 32766), all of which were skipped. "
        f"Please correct the analyzer to not produce such terms. The prefix of the first "
        f"immense term is: '[{SECRET}]...', original message: bytes can be at most 32766 in "
        "length; got 40000",
        'illegal_argument_exception: Document contains at least one immense term in field="n" '
        "(whose UTF8 encoding is longer than the max length 32766), all of which were skipped. "
        f"Please correct the analyzer to not produce such terms. The prefix of the first "
        f"immense term is: {REDACTED}, original message: bytes can be at most 32766 in "
        "length; got 40000",
    ),
    (
        f"parse_exception: illegal latitude value [{SECRET}] for location",
        f"parse_exception: illegal latitude value [{REDACTED}] for location",
    ),
    (
        f"version_conflict_engine_exception: [{SECRET}]: version conflict, document already "
        "exists (current version [1])",
        f"version_conflict_engine_exception: [{REDACTED}]: version conflict, document already "
        "exists (current version [1])",
    ),
    (
        f'number_format_exception: For input string: "{SECRET}"',
        f"number_format_exception: For input string: {REDACTED}",
    ),
    (
        f"x_content_parse_exception: Unrecognized token '{SECRET}': was expecting (JSON String,"
        f' Number) at [Source: (byte[])"{{"name": {SECRET}}}"; line: 1, column: 17]',
        f"x_content_parse_exception: Unrecognized token {REDACTED}: was expecting (JSON String,"
        f" Number) at [Source: {REDACTED}; line: 1, column: 17]",
    ),
    (
        f"Numeric value ({SECRET}) out of range of long (-9223372036854775808 - 1)",
        f"Numeric value ({REDACTED}) out of range of long (-9223372036854775808 - 1)",
    ),
    (  # cut off by a length limit: the rest of the line goes
        f"mapper_parsing_exception: failed to parse field [a] of type [b] in document with id "
        f"'{SECRET}",
        f"mapper_parsing_exception: failed to parse field [a] of type [b] in document with id "
        f"{REDACTED}",
    ),
]


@pytest.mark.parametrize(("message", "kept"), ECHOES)
def test_each_value_echo_keeps_the_reason_and_drops_the_value(message: str, kept: str) -> None:
    assert redact_values(message) == kept
    assert SECRET not in kept


@pytest.mark.parametrize(
    "message",
    [
        "illegal_argument_exception: Limit of total fields [1000] has been exceeded",
        "strict_dynamic_mapping_exception: [1:2] mapping set to strict, dynamic introduction "
        "of [x] within [_doc] is not allowed",
        "es_rejected_execution_exception: rejected execution of coordinating operation",
        "index_not_found_exception: no such index [mri]",
        "",
    ],
)
def test_reasons_without_a_value_stay_as_they_are(message: str) -> None:
    assert redact_values(message) == message


def test_search_errors_and_control_errors_are_redacted() -> None:
    body = {
        "error": {
            "root_cause": [
                {"type": "query_shard_exception", "reason": f'For input string: "{SECRET}"'}
            ],
            "type": "search_phase_execution_exception",
        },
        "status": 400,
    }
    message = loadgen.server_message(400, json.dumps(body).encode())
    assert message == f"query_shard_exception: For input string: {REDACTED}"
    raw = f"<html>Preview of field's value: '{SECRET}'</html>".encode()
    assert SECRET not in loadgen.server_message(502, raw)
    error = ControlError("create index 'mri'", f"[{SECRET}]: version conflict", 409)
    assert str(error) == f"create index 'mri' failed (HTTP 409): [{REDACTED}]: version conflict"


# ------------------------------------------------------------ end to end: ingest -> results


def preview_handler() -> type[http.server.BaseHTTPRequestHandler]:
    class Rejecting(http.server.BaseHTTPRequestHandler):
        """Answers a bulk request as Elasticsearch 8 answers documents that do not parse."""

        protocol_version = "HTTP/1.1"

        def do_POST(self) -> None:  # noqa: N802 (the name http.server calls)
            body = self.rfile.read(int(self.headers.get("Content-Length", 0)))
            items = []
            for number, line in enumerate(body.splitlines()[1::2]):
                value = json.loads(line)["age"]
                reason = (
                    f"[1:9] failed to parse field [age] of type [long] in document with id "
                    f"'{number}'. Preview of field's value: '{value}'"
                )
                error = {"type": "document_parsing_exception", "reason": reason}
                items.append({"index": {"status": 400, "error": error}})
            answer = json.dumps({"took": 1, "errors": True, "items": items}).encode()
            self.send_response(200)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(answer)))
            self.end_headers()
            self.wfile.write(answer)

        def log_message(self, format: str, *args: object) -> None:  # noqa: A002
            pass

    return Rejecting


@pytest.fixture
def connection() -> Iterator[Connection]:
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), preview_handler())
    server.daemon_threads = True
    thread = threading.Thread(target=server.serve_forever, kwargs={"poll_interval": 0.05})
    thread.start()
    target = Target("node-0", f"127.0.0.1:{server.server_address[1]}", False)
    conn = Connection(target, None, timeout=30)
    try:
        yield conn
    finally:
        conn.close()
        server.shutdown()
        server.server_close()
        thread.join(timeout=30)


def test_rejected_documents_values_never_reach_the_results(connection: Connection) -> None:
    line = json.dumps({"age": SECRET}).encode()
    batch = b'{"index":{"_index":"x"}}\n' + line + b"\n"
    batches = [Batch(batch * 20, 20, k * 40) for k in range(2)]
    recorder = Recorder(rank=1, clock=lambda: 0.0)
    outcome = loadgen.ingest(connection, batches, recorder, lambda: None, lambda n: None)
    assert outcome.rejected == 40
    acc = RunAccumulator(interval=1.0)
    acc.add_interval("ingest", None, 1, recorder.drain(), seq=0)
    acc.set_window("ingest", None, 1.0)
    head = header(run_id="red-1", started=1000.0, interval=1.0, bench_ranks=[{"rank": 1}])
    results = build_results(head, acc, Final(t=2.0, status="ok", reason=None, wall=1002.0))
    assert results.ingest is not None
    results.ingest.flag = ingest_flag(results.ingest)
    stored = json.dumps(files.to_builtins(results))
    assert SECRET not in stored
    kept = (
        f"document_parsing_exception: [1:9] failed to parse field [age] of type [long] in "
        f"document with id {REDACTED}. Preview of field's value: {REDACTED}"
    )
    assert kept in stored and kept in results.ingest.flag
