"""Rally's administrative operations as the one-off requests esdash's rank 0 sends.

Rally runs a ``force-merge``, ``put-settings``, template, data-stream or untimed
``raw-request`` task once, with one client, as a plain request (or a few) to the cluster; a
benchmark's numbers depend on them (a merged index searches differently, a pipeline changes
what is indexed).  :data:`ONE_OFF_OPERATIONS` maps each such operation type to the requests
Rally 2.13's runner sends (``esrally/driver/runner.py`` and the parameter sources of
``esrally/track/params.py``), as :class:`OneOff` records; rank 0 sends them in schedule order
(:mod:`esdash.bench.track_requests`), those before the first bulk task before the ingest and
the rest after it.

What a distribution lacks for them (data streams, ingest processors, x-pack APIs,
OpenSearch plugins, the Elasticsearch features of a template) is a :func:`refusal` naming the
module, plugin or feature, checked against the modules and plugins the backend reports
(templates: :mod:`esdash_plugins.tracks.rally.compat`).
"""

from __future__ import annotations

import copy
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING
from urllib.parse import quote, urlencode

from esdash.plugin_api import (
    BadInput,
    Distribution,
    JsonMapping,
    JsonObject,
    JsonValue,
    PlannedRequest,
    Refusal,
)

from . import template as tpl
from .compat import template_refusal
from .model import _describe
from .reader import _Reader

if TYPE_CHECKING:
    import jinja2

#: Where a one-off goes relative to esdash's ingest (by the task's place in the schedule
#: relative to the first bulk task).
BEFORE_INGEST = "before-ingest"
AFTER_INGEST = "after-ingest"
#: A request that takes as long as it takes (a merge, a restore): Rally's runner waits for
#: it, so esdash's control client waits a day rather than its usual timeout.
LONG_TIMEOUT = 86400.0


@dataclass(frozen=True)
class OneOff:
    """One request of an administrative task, as Rally's runner sends it.

    ``method`` is empty for ``sleep`` (``seconds`` long, no request); ``wait`` names a
    condition polled after the request (``recovery``: ``GET path`` until every shard's
    recovery is done).  ``missing_ok``: a 404 is success (Rally ignores it for deletes).
    ``modules`` are the distribution modules the request needs, each a tuple of names any
    one of which will do.
    """

    name: str
    operation: str
    method: str
    path: str
    body: JsonObject | None = None
    missing_ok: bool = False
    when: str = AFTER_INGEST
    seconds: float = 0.0
    wait: str = ""
    timeout: float | None = None
    modules: tuple[tuple[str, ...], ...] = ()
    #: What Rally would also do that esdash does not, said in a clause (empty: nothing).
    skipped: str = ""

    def describe(self) -> str:
        """The request in a line: ``POST /idx/_forcemerge?max_num_segments=1``."""
        if self.operation == "sleep":
            return f"sleeps {self.seconds:g} s"
        text = f"{self.method} {self.path}"
        if self.wait == "recovery":
            text += " until every shard's recovery is done"
        if self.missing_ok:
            text += " (a 404 is fine)"
        return text

    def planned(self) -> PlannedRequest:
        """The request as ``bench.json`` carries it to rank 0."""
        return PlannedRequest(
            name=self.name,
            operation=self.operation,
            method=self.method,
            path=self.path,
            body=copy.deepcopy(self.body) if self.body is not None else None,
            missing_ok=self.missing_ok,
            when=self.when,
            seconds=self.seconds,
            wait=self.wait,
            timeout=self.timeout,
        )


@dataclass(frozen=True)
class Template:
    """One entry of a track's ``templates``, ``composable-templates`` or
    ``component-templates`` section, its file rendered (and cut to ``template-path``)."""

    name: str
    content: JsonObject
    pattern: str | None = None
    delete_matching_indices: bool = True


@dataclass(frozen=True)
class Templates:
    """The track's template sections, by section name, and the texts read (so the track
    parameters they use count as used)."""

    sections: Mapping[str, tuple[Template, ...]] = field(default_factory=dict)
    texts: tuple[str, ...] = ()

    def of(self, section: str) -> tuple[Template, ...]:
        return tuple(self.sections.get(section, ()))


TEMPLATE_SECTIONS = ("templates", "composable-templates", "component-templates")
#: The operation that installs the templates of each section.
TEMPLATE_CREATORS = {
    "templates": "create-index-template",
    "composable-templates": "create-composable-template",
    "component-templates": "create-component-template",
}


def data_stream_names(reader: _Reader, spec: JsonMapping) -> tuple[str, ...]:
    """The names of the track's ``data-streams`` section."""
    names = []
    for number, entry in enumerate(reader.get(spec, "data-streams", list, "track", default=[])):
        if not isinstance(entry, dict):
            raise reader.fail(
                f"data-streams[{number}]", f"must be an object, found {_describe(entry)}"
            )
        names.append(reader.get(entry, "name", str, f"data-streams[{number}]", required=True))
    return tuple(names)


def read_templates(
    reader: _Reader, spec: JsonMapping, directory: Path, env: jinja2.Environment
) -> Templates:
    """Every template of the track, rendered as Rally renders it (``template`` is a file
    relative to the track directory, ``template-path`` a dotted path into it)."""
    sections: dict[str, tuple[Template, ...]] = {}
    texts: list[str] = []
    for section in TEMPLATE_SECTIONS:
        found = []
        for number, entry in enumerate(reader.get(spec, section, list, "track", default=[])):
            context = f"{section}[{number}]"
            if not isinstance(entry, dict):
                raise reader.fail(context, f"must be an object, found {_describe(entry)}")
            name = reader.get(entry, "name", str, context, required=True)
            where = f"{section} {name!r}"
            file = reader.get(entry, "template", str, where, name, required=True)
            path = directory / file
            if not path.is_file() or not tpl.inside(path, directory):
                raise reader.fail(
                    where,
                    f"its template file {path} is missing or outside the track directory; "
                    f"add the file or fix 'template'",
                    name,
                )
            source = tpl.assemble(path, root=tpl.env_dir(env))
            what = f"the template {name!r}"
            content = tpl.load_json(tpl.render(source, env, what), source, what)
            texts.append(source.text)
            dotted = reader.get(entry, "template-path", str, where, name)
            for part in dotted.split(".") if dotted else ():
                if not isinstance(content, dict) or part not in content:
                    raise reader.fail(
                        where, f"'template-path' {dotted!r}: {path} has no {part!r} there", name
                    )
                content = content[part]
            if not isinstance(content, dict):
                raise reader.fail(where, f"{path} must hold a JSON object", name)
            pattern = reader.get(entry, "index-pattern", str, where, name)
            matching = reader.get(entry, "delete-matching-indices", bool, where, name, default=True)
            found.append(Template(name, content, pattern, matching))
        sections[section] = tuple(found)
    return Templates(sections, tuple(texts))


# ------------------------------------------------------------------------ the mapping


@dataclass(frozen=True)
class Context:
    """What a task's requests depend on beyond its operation: the track's indices, data
    streams and templates, and where errors point."""

    reader: _Reader
    indices: Sequence[str] = ()
    data_streams: Sequence[str] = ()
    templates: Templates = field(default_factory=Templates)


@dataclass(frozen=True)
class Op:
    """One task's operation being mapped (its name, type, properties and where it is)."""

    task: str
    kind: str
    spec: JsonMapping
    where: str
    op_name: str

    def fail(self, context: Context, message: str) -> BadInput:
        error: BadInput = context.reader.fail(self.where, message, self.op_name)
        return error

    def get(
        self, context: Context, key: str, kinds: type | tuple[type, ...], required: bool = False
    ) -> JsonValue:
        value: JsonValue = context.reader.get(
            self.spec, key, kinds, self.where, self.op_name, required=required
        )
        return value

    def string(self, context: Context, key: str, required: bool = True) -> str:
        value = self.get(context, key, str, required)
        return str(value) if value is not None else ""

    def names(self, context: Context, key: str) -> list[str]:
        """A property that is a name or an array of names (empty when absent)."""
        value = self.spec.get(key)
        if value is None:
            return []
        if isinstance(value, str):
            return [value]
        if isinstance(value, list) and all(isinstance(v, str) for v in value):
            return [str(v) for v in value]
        raise self.fail(
            context, f"'{key}' must be a string or an array of strings, found {_describe(value)}"
        )

    def body(self, context: Context, required: bool = True) -> JsonObject | None:
        value = self.get(context, "body", dict, required)
        return copy.deepcopy(value) if isinstance(value, dict) else None

    def one(
        self, method: str, path: str, body: JsonObject | None = None, **extra: object
    ) -> OneOff:
        return OneOff(self.task, self.kind, method, path, body, **extra)  # type: ignore[arg-type]


def _name(value: str) -> str:
    """A name as a path segment (commas and wildcards kept, as Elasticsearch reads them)."""
    return quote(value, safe=",*")


def _query(params: Mapping[str, JsonValue]) -> str:
    """Request parameters as the client puts them into the query string."""
    kept = {k: v for k, v in params.items() if v is not None}
    if not kept:
        return ""
    return "?" + urlencode(
        {k: ("true" if v is True else "false" if v is False else str(v)) for k, v in kept.items()}
    )


def _request_params(op: Op, context: Context) -> Mapping[str, JsonValue]:
    value = op.get(context, "request-params", dict)
    return value if isinstance(value, dict) else {}


def force_merge(op: Op, context: Context) -> list[OneOff]:
    """``POST /TARGET/_forcemerge[?max_num_segments=N]``: the task's ``index`` (or
    ``data-stream``), else every index and data stream of the track, else ``_all``.  Rally
    waits for the merge (``mode: polling`` polls the task instead; the end is the same)."""
    target = op.string(context, "index", False) or op.string(context, "data-stream", False)
    target = target or ",".join([*context.indices, *context.data_streams]) or "_all"
    segments = op.get(context, "max-num-segments", int)
    timeout = op.get(context, "request-timeout", (int, float))
    path = f"/{_name(target)}/_forcemerge" + _query({"max_num_segments": segments})
    wait = float(timeout) if isinstance(timeout, int | float) else LONG_TIMEOUT
    return [op.one("POST", path, timeout=wait)]


def put_settings(op: Op, context: Context) -> list[OneOff]:
    """``PUT /_cluster/settings`` with the task's ``body``."""
    return [op.one("PUT", "/_cluster/settings", op.body(context))]


#: Ingest processors and the modules that provide them (Elasticsearch and OpenSearch share
#: the names); processors not listed are in the server or unknown here.
PROCESSOR_MODULES: dict[str, tuple[str, ...]] = {
    **{
        name: ("ingest-common",)
        for name in (
            "append", "bytes", "community_id", "convert", "csv", "date", "date_index_name",
            "dissect", "dot_expander", "drop", "fail", "fingerprint", "foreach", "grok", "gsub",
            "html_strip", "join", "json", "kv", "lowercase", "network_direction", "pipeline",
            "registered_domain", "remove", "rename", "reroute", "set", "sort", "split", "trim",
            "uppercase", "uri_parts", "urldecode",
        )
    },
    "script": ("lang-painless",),
    "geoip": ("ingest-geoip",),
    "ip_location": ("ingest-geoip",),
    "user_agent": ("ingest-user-agent",),
    "attachment": ("ingest-attachment",),
    "inference": ("x-pack-ml", "ml"),
    "enrich": ("x-pack-enrich",),
    "set_security_user": ("x-pack-security",),
}  # fmt: skip


def processors(body: JsonValue) -> list[str]:
    """Every processor type of a pipeline body (nested ``on_failure`` and ``foreach`` too)."""
    found: list[str] = []

    def visit(items: JsonValue) -> None:
        for item in items if isinstance(items, list) else ():
            for kind, spec in item.items() if isinstance(item, dict) else ():
                found.append(kind)
                if isinstance(spec, dict):
                    visit(spec.get("on_failure"))
                    inner = spec.get("processor")
                    if isinstance(inner, dict):
                        visit([inner])

    if isinstance(body, dict):
        visit(body.get("processors"))
        visit(body.get("on_failure"))
    return found


def _templated(value: JsonValue) -> bool:
    """Whether a processor's options hold a ``{{...}}`` template anywhere."""
    if isinstance(value, str):
        return "{{" in value
    if isinstance(value, dict):
        return any(_templated(v) for v in value.values())
    if isinstance(value, list):
        return any(_templated(v) for v in value)
    return False


def pipeline_modules(body: JsonValue) -> tuple[tuple[str, ...], ...]:
    """The modules a pipeline body needs: those of its processors, and ``lang-mustache``
    when an option is a ``{{...}}`` template, which the engine renders as a mustache script.
    Without the module OpenSearch 3.4 takes the pipeline but keeps the template as literal
    text: github_archive's ``set`` of ``@timestamp`` to ``{{{_ingest.timestamp}}}`` then
    writes that text into a date field, and every document is rejected
    (``mapper_parsing_exception``)."""
    needs = [PROCESSOR_MODULES[p] for p in processors(body) if p in PROCESSOR_MODULES]
    if isinstance(body, dict) and _templated(body.get("processors")):
        needs.append(("lang-mustache",))
    return tuple(dict.fromkeys(needs))


def put_pipeline(op: Op, context: Context) -> list[OneOff]:
    """``PUT /_ingest/pipeline/ID`` with the task's ``body``; needs the modules of its
    processors (:func:`pipeline_modules`)."""
    body = op.body(context)
    needs = pipeline_modules(body)
    path = f"/_ingest/pipeline/{_name(op.string(context, 'id'))}"
    return [op.one("PUT", path, body, modules=needs)]


def _merge(target: JsonObject, extra: Mapping[str, JsonValue]) -> None:
    """Rally's deep merge of a task's ``settings`` into a template body."""
    for key, value in extra.items():
        current = target.get(key)
        if isinstance(current, dict) and isinstance(value, Mapping):
            _merge(current, value)
        else:
            target[key] = copy.deepcopy(value)


def _create_templates(op: Op, context: Context, section: str, api: str) -> list[OneOff]:
    """``PUT /API/NAME`` for the task's ``template`` and ``body``, else for each template of
    the track's ``section`` (the one ``template`` names, if it names one), the task's
    ``settings`` merged into it as Rally merges them."""
    wanted = op.string(context, "template", False)
    params = _query(_request_params(op, context))
    if wanted and "body" in op.spec:
        pairs = [(wanted, op.body(context) or {})]
    else:
        templates = context.templates.of(section)
        if not templates:
            raise op.fail(
                context,
                f"set 'template' and 'body', or declare '{section}' in the track "
                f"(Rally needs one of them for {op.kind})",
            )
        chosen = [t for t in templates if not wanted or t.name == wanted]
        if not chosen:
            known = ", ".join(t.name for t in templates)
            raise op.fail(context, f"'template' {wanted!r} is not among the track's {known}")
        settings = op.get(context, "settings", dict)
        pairs = []
        for template in chosen:
            body = copy.deepcopy(template.content)
            if isinstance(settings, dict) and settings:
                if section == "templates":  # legacy templates carry settings at the top
                    _merge(body.setdefault("settings", {}), settings)
                else:
                    _merge(body.setdefault("template", {}).setdefault("settings", {}), settings)
            pairs.append((template.name, body))
    if section == "component-templates":  # Rally sends the template part only
        pairs = [(name, {"template": body.get("template", {})}) for name, body in pairs]
    return [op.one("PUT", f"/{api}/{_name(name)}{params}", body) for name, body in pairs]


def _delete_templates(op: Op, context: Context, section: str, api: str) -> list[OneOff]:
    """``DELETE /API/NAME`` for the task's ``template``, else each template of the track's
    ``section``; a missing template is fine (Rally checks or ignores 404).  Rally also
    deletes the indices a template's pattern matches (``delete-matching-indices``): esdash
    never deletes an index it did not make, and re-creates its own itself."""
    wanted = op.string(context, "template", False)
    templates = context.templates.of(section)
    if templates:
        chosen = [(t.name, t.pattern if t.delete_matching_indices else None) for t in templates]
        chosen = [(name, pattern) for name, pattern in chosen if not wanted or name == wanted]
    elif wanted:
        matching = op.get(context, "delete-matching-indices", bool)
        chosen = [(wanted, op.string(context, "index-pattern", False) if matching else None)]
    else:
        raise op.fail(context, f"set 'template' (the template {op.kind} deletes)")
    params = _query(_request_params(op, context))
    found = []
    for name, pattern in chosen:
        skipped = (
            f"Rally would also delete the indices matching {pattern!r}; esdash never deletes "
            f"an index it did not make"
            if pattern and section != "component-templates"
            else ""
        )
        found.append(
            op.one("DELETE", f"/{api}/{_name(name)}{params}", missing_ok=True, skipped=skipped)
        )
    return found


def _streams(op: Op, context: Context, create: bool) -> list[str]:
    wanted = op.names(context, "data-stream")
    if create and context.data_streams:  # the track's streams, those named if any
        names = [n for n in context.data_streams if not wanted or n in wanted]
    else:
        names = wanted or list(context.data_streams)
    if not names:
        raise op.fail(context, f"set 'data-stream' (the data stream {op.kind} targets)")
    return names


#: Modules serving data streams: Elasticsearch 8/9 (``data-streams``), 7.17 (x-pack).
DATA_STREAM_MODULES = ("data-streams", "x-pack-data-streams")


def create_data_stream(op: Op, context: Context) -> list[OneOff]:
    """``PUT /_data_stream/NAME`` for each data stream (the track's, or those named)."""
    params = _query(_request_params(op, context))
    return [
        op.one("PUT", f"/_data_stream/{_name(n)}{params}", modules=(DATA_STREAM_MODULES,))
        for n in _streams(op, context, True)
    ]


def delete_data_stream(op: Op, context: Context) -> list[OneOff]:
    """``DELETE /_data_stream/NAME``; a missing stream is fine (Rally checks or ignores 404)."""
    params = _query(_request_params(op, context))
    return [
        op.one(
            "DELETE",
            f"/_data_stream/{_name(n)}{params}",
            missing_ok=True,
            modules=(DATA_STREAM_MODULES,),
        )
        for n in _streams(op, context, False)
    ]


def sleep(op: Op, context: Context) -> list[OneOff]:
    """No request: Rally's client sleeps ``duration`` seconds."""
    duration = op.get(context, "duration", (int, float), required=True)
    assert isinstance(duration, int | float)
    if duration < 0:
        raise op.fail(context, f"'duration' must be >= 0, found {duration}")
    return [op.one("", "", seconds=float(duration))]


def wait_for_recovery(op: Op, context: Context) -> list[OneOff]:
    """``GET /INDEX/_recovery`` until every shard's recovery stage is ``DONE``."""
    index = op.string(context, "index")
    return [op.one("GET", f"/{_name(index)}/_recovery", wait="recovery")]


_ML = (("x-pack-ml", "ml"),)
_TRANSFORM = (("x-pack-transform", "transform"),)
_ILM = (("x-pack-ilm", "ilm"),)


def _ml(method: str, template: str, key: str, body: bool = False, **flags: str) -> Handler:
    """An ML operation: ``METHOD template`` with the task's ``key`` (job or datafeed id)."""

    def handler(op: Op, context: Context) -> list[OneOff]:
        path = template.format(_name(op.string(context, key)))
        params = {param: op.spec.get(prop) for param, prop in flags.items()}
        payload = op.body(context, required=method == "PUT") if body else None
        missing_ok = method == "DELETE"
        return [op.one(method, path + _query(params), payload, missing_ok=missing_ok, modules=_ML)]

    return handler


def _transform(method: str, suffix: str, body: bool = False, **flags: str) -> Handler:
    def handler(op: Op, context: Context) -> list[OneOff]:
        path = f"/_transform/{_name(op.string(context, 'transform-id'))}{suffix}"
        params = {param: op.spec.get(prop) for param, prop in flags.items()}
        payload = op.body(context) if body else None
        missing_ok = method == "DELETE"
        return [
            op.one(
                method, path + _query(params), payload, missing_ok=missing_ok, modules=_TRANSFORM
            )
        ]

    return handler


def wait_for_transform(op: Op, context: Context) -> list[OneOff]:
    """Rally stops the transform at its next checkpoint and waits until it has stopped
    (``transform-timeout``, default an hour): ``_stop`` with ``wait_for_checkpoint`` and
    ``wait_for_completion`` does the same in one request."""
    limit = op.get(context, "transform-timeout", (int, float))
    seconds = float(limit) if isinstance(limit, int | float) else 3600.0
    params = {
        "force": op.spec.get("force"),
        "wait_for_checkpoint": op.spec.get("wait-for-checkpoint", True),
        "wait_for_completion": op.spec.get("wait-for-completion", True),
        "timeout": f"{seconds:g}s",
    }
    path = f"/_transform/{_name(op.string(context, 'transform-id'))}/_stop" + _query(params)
    return [op.one("POST", path, timeout=seconds + 60.0, modules=_TRANSFORM)]


def create_ilm_policy(op: Op, context: Context) -> list[OneOff]:
    """``PUT /_ilm/policy/NAME`` with the body's ``policy``."""
    body = op.body(context) or {}
    if not isinstance(body.get("policy"), dict):
        raise op.fail(context, "'body' must hold a top-level 'policy' object, as Rally requires")
    path = f"/_ilm/policy/{_name(op.string(context, 'policy-name'))}"
    return [op.one("PUT", path, {"policy": body["policy"]}, modules=_ILM)]


def delete_ilm_policy(op: Op, context: Context) -> list[OneOff]:
    path = f"/_ilm/policy/{_name(op.string(context, 'policy-name'))}"
    return [op.one("DELETE", path, missing_ok=True, modules=_ILM)]


#: Snapshot repository types and their modules (``fs`` and ``source`` are in the server).
REPOSITORY_MODULES = {
    "url": ("repository-url",),
    "s3": ("repository-s3",),
    "gcs": ("repository-gcs",),
    "azure": ("repository-azure",),
    "hdfs": ("repository-hdfs",),
}


def create_snapshot_repository(op: Op, context: Context) -> list[OneOff]:
    body = op.body(context) or {}
    kind = body.get("type")
    needs = (
        (REPOSITORY_MODULES[kind],) if isinstance(kind, str) and kind in REPOSITORY_MODULES else ()
    )
    path = f"/_snapshot/{_name(op.string(context, 'repository'))}"
    return [op.one("PUT", path + _query(_request_params(op, context)), body, modules=needs)]


def delete_snapshot_repository(op: Op, context: Context) -> list[OneOff]:
    path = f"/_snapshot/{_name(op.string(context, 'repository'))}"
    return [op.one("DELETE", path, missing_ok=True)]


def restore_snapshot(op: Op, context: Context) -> list[OneOff]:
    """``POST /_snapshot/REPO/SNAPSHOT/_restore`` (``wait_for_completion`` as the task says,
    default false as in Rally)."""
    repo = _name(op.string(context, "repository"))
    snapshot = _name(op.string(context, "snapshot"))
    params = {
        **_request_params(op, context),
        "wait_for_completion": bool(op.spec.get("wait-for-completion", False)),
    }
    path = f"/_snapshot/{repo}/{snapshot}/_restore" + _query(params)
    return [op.one("POST", path, op.body(context, False) or {}, timeout=LONG_TIMEOUT)]


Handler = Callable[[Op, Context], list[OneOff]]

#: Rally 2.13 operation types esdash sends as one-off requests, and how.
ONE_OFF_OPERATIONS: dict[str, Handler] = {
    "force-merge": force_merge,
    "put-settings": put_settings,
    "put-pipeline": put_pipeline,
    "create-composable-template": lambda op, c: _create_templates(
        op, c, "composable-templates", "_index_template"
    ),
    "delete-composable-template": lambda op, c: _delete_templates(
        op, c, "composable-templates", "_index_template"
    ),
    "create-component-template": lambda op, c: _create_templates(
        op, c, "component-templates", "_component_template"
    ),
    "delete-component-template": lambda op, c: _delete_templates(
        op, c, "component-templates", "_component_template"
    ),
    "create-index-template": lambda op, c: _create_templates(op, c, "templates", "_template"),
    "delete-index-template": lambda op, c: _delete_templates(op, c, "templates", "_template"),
    "create-data-stream": create_data_stream,
    "delete-data-stream": delete_data_stream,
    "sleep": sleep,
    "wait-for-recovery": wait_for_recovery,
    "create-ilm-policy": create_ilm_policy,
    "delete-ilm-policy": delete_ilm_policy,
    "create-ml-job": _ml("PUT", "/_ml/anomaly_detectors/{}", "job-id", body=True),
    "delete-ml-job": _ml("DELETE", "/_ml/anomaly_detectors/{}", "job-id", force="force"),
    "open-ml-job": _ml("POST", "/_ml/anomaly_detectors/{}/_open", "job-id"),
    "close-ml-job": _ml(
        "POST", "/_ml/anomaly_detectors/{}/_close", "job-id", force="force", timeout="timeout"
    ),
    "create-ml-datafeed": _ml("PUT", "/_ml/datafeeds/{}", "datafeed-id", body=True),
    "delete-ml-datafeed": _ml("DELETE", "/_ml/datafeeds/{}", "datafeed-id", force="force"),
    "start-ml-datafeed": _ml(
        "POST",
        "/_ml/datafeeds/{}/_start",
        "datafeed-id",
        body=True,
        start="start",
        end="end",
        timeout="timeout",
    ),
    "stop-ml-datafeed": _ml(
        "POST", "/_ml/datafeeds/{}/_stop", "datafeed-id", force="force", timeout="timeout"
    ),
    "create-transform": _transform("PUT", "", body=True, defer_validation="defer-validation"),
    "start-transform": _transform("POST", "/_start", timeout="timeout"),
    "delete-transform": _transform("DELETE", "", force="force"),
    "wait-for-transform": wait_for_transform,
    "create-snapshot-repository": create_snapshot_repository,
    "delete-snapshot-repository": delete_snapshot_repository,
    "restore-snapshot": restore_snapshot,
}


def one_offs(
    task: str, kind: str, spec: JsonMapping, where: str, op_name: str, context: Context
) -> list[OneOff]:
    """The requests of one task of operation type ``kind`` (in :data:`ONE_OFF_OPERATIONS`)."""
    return ONE_OFF_OPERATIONS[kind](Op(task, kind, spec, where, op_name), context)


def raw_request(
    task: str, method: str, path: str, body: JsonMapping | None, when: str = AFTER_INGEST
) -> OneOff:
    """An untimed ``raw-request`` task: its request sent once, as Rally's client sends it
    (the caller has checked ``method`` and ``path`` and put ``request-params`` on it)."""
    payload = copy.deepcopy(dict(body)) if body else None
    return OneOff(task, "raw-request", method, path, payload, when=when)


# ------------------------------------------------------------------------ refusals

#: Path prefixes of raw requests served by a module, and the modules (any one will do).
PATH_MODULES: tuple[tuple[str, tuple[str, ...]], ...] = (
    ("/_data_stream", DATA_STREAM_MODULES),
    ("/_ilm/", _ILM[0]),
    ("/_ml/", _ML[0]),
    ("/_transform", _TRANSFORM[0]),
    ("/_enrich/", ("x-pack-enrich",)),
    ("/_esql", ("x-pack-esql",)),
    ("/_sql", ("x-pack-sql",)),
)


#: OpenSearch plugin APIs by path prefix, and the plugin serving each (a directory of
#: ``plugins/`` in the official tarball; esdash's assembly installs only the security plugin).
PATH_PLUGINS: tuple[tuple[str, str], ...] = (
    ("/_plugins/_ism/", "opensearch-index-management"),
    ("/_plugins/_rollup/", "opensearch-index-management"),
    ("/_plugins/_knn/", "opensearch-knn"),
    ("/_plugins/_ml/", "opensearch-ml"),
    ("/_plugins/_sql", "opensearch-sql"),
    ("/_plugins/_ppl", "opensearch-sql"),
    ("/_plugins/_neural/", "opensearch-neural-search"),
    ("/_plugins/_security/", "opensearch-security"),
)


#: Path segments of APIs served by a module wherever they appear in the path
#: (``/logs-*/_terms_enum``), and the modules (any one will do).
SEGMENT_MODULES: dict[str, tuple[str, ...]] = {"_terms_enum": ("x-pack-core",)}


def is_elasticsearch(distribution: Distribution) -> bool:
    """Every Elasticsearch distribution esdash runs ships ``x-pack-core``; OpenSearch never
    does (and has data streams in its server)."""
    return "x-pack-core" in distribution.modules


def needed_modules(one: OneOff) -> tuple[tuple[str, ...], ...]:
    """The modules ``one`` needs: its own, and for a raw request those of its path (and of
    the processors of a pipeline it puts)."""
    needs = list(one.modules)
    if one.operation == "raw-request":
        needs += [modules for prefix, modules in PATH_MODULES if one.path.startswith(prefix)]
        segments = one.path.split("?", 1)[0].split("/")
        needs += [SEGMENT_MODULES[s] for s in segments if s in SEGMENT_MODULES]
        if one.path.startswith("/_ingest/pipeline/") and one.method == "PUT":
            needs += pipeline_modules(one.body)
    return tuple(dict.fromkeys(needs))


def refusal(one: OneOff, distribution: Distribution | None) -> Refusal | None:
    """Why ``distribution`` cannot serve ``one`` (None: it can, as far as its modules tell,
    or there is no distribution): a module it lacks, checked against the modules the
    backend reports (OpenSearch has data streams in its server), an OpenSearch plugin it
    has not installed, or what a template it puts asks of the engine
    (:func:`~esdash_plugins.tracks.rally.compat.template_refusal`)."""
    if distribution is None:
        return None
    modules = set(distribution.modules)
    for choices in needed_modules(one):
        if choices == DATA_STREAM_MODULES and not is_elasticsearch(distribution):
            continue
        if not modules & set(choices):
            return Refusal(
                "module",
                f"{one.describe()} needs the {choices[0]} module, which this "
                f"{distribution.flavor} distribution {distribution.version} does not have",
                choices[0],
            )
    plugin = next((p for prefix, p in PATH_PLUGINS if one.path.startswith(prefix)), None)
    if plugin is not None and plugin not in distribution.plugins:
        return Refusal(
            "module",
            f"{one.describe()} needs the {plugin} plugin, which this {distribution.flavor} "
            f"distribution {distribution.version} does not have installed",
            plugin,
        )
    if one.operation in TEMPLATE_CREATORS.values() or one.operation == "raw-request":
        return template_refusal(
            one.method, one.path, one.body, distribution, is_elasticsearch(distribution)
        )
    return None
