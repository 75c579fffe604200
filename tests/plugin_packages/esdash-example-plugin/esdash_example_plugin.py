"""esdash-example-plugin: a web-server access-log track and a RoCE interconnect.

The module is one esdash plugin (entry point ``example`` in ``pyproject.toml``).  It
implements two registration hooks of :mod:`esdash.plugin.spec`:

- ``esdash_register_tracks`` registers :class:`WeblogsTrack` (track ``weblogs``);
- ``esdash_register_interconnects`` registers :class:`RoCE` (interconnect ``roce``).

Sessions choose them with ``track.name = "weblogs"`` and ``cluster.interconnect = "roce"``;
the track's options are the other keys of the session's ``[track]`` table.
"""

from __future__ import annotations

import random
from collections.abc import Iterator, Mapping
from datetime import datetime, timedelta, timezone
from pathlib import Path
from typing import Any

from esdash.plugin_api import (
    Corpus,
    FieldSpec,
    Interconnect,
    Option,
    Query,
    QueryStep,
    Track,
    generated_corpus,
    hookimpl,
)

# ----------------------------------------------------------------------------- weblogs

#: The field schema: one entry per document field, with ranges for numbers.  The mapping is
#: derived from it, so schema and mapping cannot drift apart.
FIELDS = (
    FieldSpec("@timestamp", "date"),
    FieldSpec("client_ip", "keyword"),
    FieldSpec("method", "keyword"),
    FieldSpec("path", "text+keyword"),
    FieldSpec("status", "integer", 100, 599, 1),
    FieldSpec("bytes", "integer", 0, 10_000_000, 1),
    FieldSpec("duration_ms", "float", 0.0, 60_000.0, 0.001),
    FieldSpec("user_agent", "text"),
)

#: Elasticsearch mapping of each schema type.
MAPPING_OF_TYPE: dict[str, dict[str, Any]] = {
    "date": {"type": "date", "format": "strict_date_optional_time"},
    "keyword": {"type": "keyword"},
    "text": {"type": "text"},
    "text+keyword": {"type": "text", "fields": {"keyword": {"type": "keyword"}}},
    "integer": {"type": "integer"},
    "float": {"type": "double"},
}

#: The first timestamp of the generated traffic.
START = datetime(2024, 1, 1, tzinfo=timezone.utc)

METHODS = ("GET", "GET", "GET", "GET", "POST", "POST", "PUT", "DELETE", "HEAD")
PATHS = (
    "/",
    "/index.html",
    "/search",
    "/login",
    "/api/v1/items",
    "/api/v1/orders",
    "/static/app.js",
    "/static/style.css",
)
OK_STATUSES = (200, 200, 200, 200, 201, 204, 301, 304)
ERROR_STATUSES = (400, 401, 403, 404, 404, 429, 500, 502, 503)
#: Statuses whose responses have no body.
EMPTY_STATUSES = frozenset({204, 304})
USER_AGENTS = (
    "Mozilla/5.0 (X11; Linux x86_64; rv:128.0) Gecko/20100101 Firefox/128.0",
    "Mozilla/5.0 (Macintosh; Intel Mac OS X 14_5) AppleWebKit/605.1.15 Safari/605.1.15",
    "Mozilla/5.0 (Windows NT 10.0; Win64; x64) AppleWebKit/537.36 Chrome/126.0 Safari/537.36",
    "curl/8.5.0",
    "python-requests/2.32.3",
)


def mapping() -> dict[str, Any]:
    """The explicit, strict mapping of the weblogs index, derived from :data:`FIELDS`."""
    properties = {spec.path: dict(MAPPING_OF_TYPE[spec.type]) for spec in FIELDS}
    return {"dynamic": "strict", "properties": properties}


class WeblogsTrack(Track):
    """Synthetic access logs of a web shop: timestamps in order, a configurable error share."""

    name = "weblogs"
    description = "synthetic web-server access logs (8 fields), strict mapping"
    index = "weblogs"
    options = (
        Option("documents", "int", "number of generated log lines", default=100_000, minimum=1),
        Option("seed", "int", "seed of the log generator", default=1),
        Option("days", "int", "days of traffic the timestamps span", 7, minimum=1, maximum=3650),
        Option(
            "error_rate",
            "float",
            "share of requests answered with a 4xx/5xx status",
            default=0.05,
            minimum=0.0,
            maximum=1.0,
        ),
        Option("shards", "int", "primary shards of the index", default=1, minimum=1, maximum=1024),
        Option("replicas", "int", "replicas per shard", default=0, minimum=0, maximum=16),
        Option(
            "refresh_interval",
            "duration",
            "how often the index refreshes while documents are ingested",
            default=1.0,
            minimum=0.1,
            maximum=3600,
        ),
    )
    fields = FIELDS

    def resolved(self, options: Mapping[str, Any]) -> dict[str, Any]:
        """``options`` with the declared defaults filled in for keys it lacks.

        Sessions pass every option already validated and completed; tests and other callers
        may pass only the keys they care about.
        """
        return {option.name: options.get(option.name, option.default) for option in self.options}

    def index_body(self, options: Mapping[str, Any]) -> dict[str, Any]:
        values = self.resolved(options)
        return {
            "settings": {
                "number_of_shards": values["shards"],
                "number_of_replicas": values["replicas"],
                # Durations arrive in seconds; Elasticsearch wants a unit.
                "refresh_interval": f"{round(values['refresh_interval'] * 1000)}ms",
            },
            "mappings": mapping(),
        }

    def documents(self, options: Mapping[str, Any]) -> Iterator[dict[str, Any]]:
        """Generate the corpus: ``documents`` log lines over ``days`` days, same seed same lines."""
        values = self.resolved(options)
        rng = random.Random(values["seed"])
        count = values["documents"]
        span = values["days"] * 86400.0
        for i in range(count):
            failed = rng.random() < values["error_rate"]
            status = rng.choice(ERROR_STATUSES if failed else OK_STATUSES)
            # One slot of the span per line, a random moment inside it: ordered timestamps.
            moment = START + timedelta(seconds=span * (i + rng.random()) / count)
            yield {
                "@timestamp": moment.isoformat(timespec="milliseconds"),
                "client_ip": "10.{}.{}.{}".format(*(rng.randrange(1, 255) for _ in range(3))),
                "method": rng.choice(METHODS),
                "path": rng.choice(PATHS),
                "status": status,
                "bytes": 0 if status in EMPTY_STATUSES else rng.randint(120, 2_000_000),
                "duration_ms": round(min(rng.lognormvariate(3.0, 1.2), 60_000.0), 3),
                "user_agent": rng.choice(USER_AGENTS),
            }

    def corpus(self, options: Mapping[str, Any], cache_dir: Path) -> Corpus:
        """Write the generated lines to ``cache_dir`` once per option set and return the file.

        The file name carries every option the lines depend on, so a changed option never
        reuses a stale corpus.  ``generated_corpus`` writes it atomically (a temporary file,
        then a rename) the first time and reuses it afterwards.
        """
        values = self.resolved(options)
        key = "-".join(str(values[k]) for k in ("documents", "seed", "days", "error_rate"))
        path = Path(cache_dir) / f"weblogs-{key}.ndjson"
        return generated_corpus(path, self.documents(values), values["documents"])

    def query_steps(self, options: Mapping[str, Any]) -> tuple[QueryStep, ...]:
        """Three steps: a term filter, a full-text search and an aggregation.

        ``None`` warm-up and duration: the session's defaults apply.
        """
        return (
            QueryStep("errors", (Query("errors", {"query": {"range": {"status": {"gte": 500}}}}),)),
            QueryStep(
                "search",
                (
                    Query("api_path", {"query": {"match": {"path": "api"}}}),
                    Query("firefox", {"query": {"match": {"user_agent": "Firefox"}}}),
                ),
            ),
            QueryStep(
                "status_histogram",
                (
                    Query(
                        "status_histogram",
                        {"size": 0, "aggs": {"status": {"terms": {"field": "status"}}}},
                    ),
                ),
            ),
        )


# -------------------------------------------------------------------------------- roce


class RoCE(Interconnect):
    """RDMA over Converged Ethernet ports.

    Elasticsearch talks TCP, so a node binds the IP address of the RDMA-capable Ethernet
    port.  Kernels name such ports after their physical port (``np0``, ``np1`` suffixes on
    ConnectX and Broadcom NICs, e.g. ``ens1f0np0``); sites that rename them to ``roce*`` are
    covered too.  Anything else: set ``cluster.interface`` in the session.
    """

    name = "roce"
    description = "TCP over RoCE-capable Ethernet ports (en*np0, roce*)"
    patterns = ("roce*", "en*np[0-9]*", "eth*np[0-9]*")


# ------------------------------------------------------------------------------- hooks


@hookimpl
def esdash_register_tracks(register) -> None:
    register(WeblogsTrack())


@hookimpl
def esdash_register_interconnects(register) -> None:
    register(RoCE())


# Observers run in the orchestrator (`esdash run`), never on a rank, once per session event:
# a cheap place for exporters and notifications.  This one appends a line per event to the
# run directory.
@hookimpl
def esdash_session_started(session, run_dir) -> None:
    with open(f"{run_dir}/example-plugin-events.log", "a") as log:
        log.write(f"started {session.name}\n")


@hookimpl
def esdash_session_finished(session, run_dir, results) -> None:
    with open(f"{run_dir}/example-plugin-events.log", "a") as log:
        log.write(f"finished {session.name} results={'yes' if results else 'none'}\n")
