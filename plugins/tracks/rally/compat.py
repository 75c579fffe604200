"""What an index template of a Rally track asks of an engine that OpenSearch lacks.

Many tracks of elastic/rally-tracks install composable and component templates written for
Elasticsearch 8/9: a data stream ``lifecycle``, time-series and logsdb index modes, synthetic
``_source``, ``time_series_metric`` on fields.  OpenSearch 3 answers each with a 400 at the
template (``unknown setting``, ``unknown parameter``), and neither Rally nor OpenSearch
Benchmark translates them; so esdash's plan refuses the template task, naming what is missing,
instead of letting a run fail at its first request.

:func:`template_refusal` reads a template request (``PUT /_index_template/NAME``,
``/_component_template/NAME``, ``/_template/NAME``) and answers with a
:class:`~esdash.plugin_api.Refusal`: a setting or key served by an Elasticsearch module is a
``module`` refusal naming it (``data-streams`` for the lifecycle, ``x-pack-ilm`` for
``index.lifecycle.*``), Elasticsearch's own mapping features are a ``mapper`` refusal, and a
field type the distribution does not map is the ``mapper``/``field_type`` refusal of
:func:`~esdash.plugin_api.mapping_refusal`.  Every entry of the tables below was sent to
OpenSearch 3.4.0 in a component template of its own, and each was answered with a 400
(``unknown setting``, ``unknown parameter``, ``failed to parse field [template]``), while
``meta`` on a field, ``_meta``, ``index.query.default_field``, ``index.sort.*`` and
``data_stream.hidden``/``allow_custom_routing`` were taken.
"""

from __future__ import annotations

from collections.abc import Iterator
from urllib.parse import unquote

from esdash.plugin_api import Distribution, JsonMapping, JsonValue, Refusal, mapping_refusal

#: The template APIs, by path prefix.
TEMPLATE_APIS = ("/_index_template/", "/_component_template/", "/_template/")

#: Keys of a composable or component template's ``template`` part that are Elasticsearch's:
#: key -> (what it is, the Elasticsearch module serving it).
TEMPLATE_KEYS: dict[str, tuple[str, str]] = {
    "lifecycle": ("the data stream lifecycle", "data-streams"),
    "data_stream_options": ("the data stream failure store", "data-streams"),
}

#: Index settings served by an Elasticsearch module (a prefix of the setting's name, without
#: ``index.``) -> (what it is, the module).
SETTING_MODULES: dict[str, tuple[str, str]] = {
    "lifecycle.": ("an index lifecycle (ILM) policy", "x-pack-ilm"),
}

#: Index settings of Elasticsearch's server that OpenSearch does not have (a prefix of the
#: setting's name, without ``index.``) -> what it is.
ELASTICSEARCH_SETTINGS: dict[str, str] = {
    "mode": "an index mode (time_series, logsdb)",
    "mapping.source.mode": "synthetic or disabled _source by setting",
    "time_series.": "a time-series index's bounds",
    "routing_path": "a time-series routing path",
    "look_ahead_time": "a time-series data stream's look-ahead",
    "mapping.synthetic_source_keep": "what synthetic _source keeps",
    "mapping.total_fields.ignore_dynamic_beyond_limit": "dynamic fields beyond the limit ignored",
}

#: Mapping parameters of Elasticsearch's server at the root of ``mappings`` that OpenSearch
#: does not have.
ELASTICSEARCH_ROOT_PARAMETERS: dict[str, str] = {
    "runtime": "runtime fields",
    "subobjects": "dotted field names kept flat",
}

#: Mapping parameters of Elasticsearch's server that OpenSearch does not have (on a field).
ELASTICSEARCH_FIELD_PARAMETERS: dict[str, str] = {
    "time_series_metric": "a time-series metric",
    "time_series_dimension": "a time-series dimension",
    "subobjects": "dotted field names kept flat",
}


def _flat(settings: JsonValue, prefix: str = "") -> Iterator[tuple[str, JsonValue]]:
    """``(name, value)`` of every setting, nested objects joined with dots, ``index.`` cut."""
    if not isinstance(settings, dict):
        return
    for key, value in settings.items():
        name = f"{prefix}{key}"
        if isinstance(value, dict):
            yield from _flat(value, f"{name}.")
        else:
            yield name.removeprefix("index."), value


def _fields(properties: JsonValue, prefix: str = "") -> Iterator[tuple[str, JsonMapping]]:
    """``(path, mapping)`` of every field under ``properties`` (objects and multi-fields)."""
    if not isinstance(properties, dict):
        return
    for name, spec in properties.items():
        if not isinstance(spec, dict):
            continue
        path = f"{prefix}{name}"
        yield path, spec
        yield from _fields(spec.get("properties"), f"{path}.")
        yield from _fields(spec.get("fields"), f"{path}.")


def _lacks(distribution: Distribution) -> str:
    return f"this {distribution.flavor} distribution {distribution.version} does not have"


def template_refusal(
    method: str, path: str, body: JsonValue, distribution: Distribution | None, elasticsearch: bool
) -> Refusal | None:
    """Why ``distribution`` cannot install the template that ``method path body`` puts
    (None: it can, as far as esdash knows, or the request installs no template).

    ``elasticsearch`` says whether the distribution is Elasticsearch, which has every
    Elasticsearch server feature; a module it serves is checked against its modules.
    """
    if distribution is None or method != "PUT" or not isinstance(body, dict):
        return None
    if not path.startswith(TEMPLATE_APIS):
        return None
    name = unquote(path.split("?", 1)[0].rstrip("/").rsplit("/", 1)[-1])
    part = body if path.startswith("/_template/") else body.get("template")
    part = part if isinstance(part, dict) else {}
    return body_refusal(f"template {name}", part, distribution, elasticsearch)


def body_refusal(
    what: str, body: JsonMapping, distribution: Distribution | None, elasticsearch: bool
) -> Refusal | None:
    """Why ``distribution`` cannot take ``body`` (an index body, or a template's own part:
    ``settings``, ``mappings`` and a composable template's other keys); ``what`` names it
    in the reason.  None: it can, as far as esdash knows."""
    if distribution is None:
        return None
    settings = body.get("settings")
    mappings = body.get("mappings")
    settings = settings if isinstance(settings, dict) else {}
    mappings = mappings if isinstance(mappings, dict) else {}
    modules = set(distribution.modules)
    for key, (meaning, module) in TEMPLATE_KEYS.items():
        if key in body and module not in modules and not elasticsearch:
            return Refusal(
                "module",
                f"{what} sets {key!r} ({meaning}), which needs the {module} module of "
                f"Elasticsearch; {_lacks(distribution)} it",
                module,
            )
    for setting, value in _flat(settings):
        for prefix, (meaning, module) in SETTING_MODULES.items():
            if setting.startswith(prefix) and module not in modules:
                return Refusal(
                    "module",
                    f"{what} sets index.{setting} ({meaning}), which needs the {module} module; "
                    f"{_lacks(distribution)} it",
                    module,
                )
        if elasticsearch:
            continue
        for prefix, meaning in ELASTICSEARCH_SETTINGS.items():
            if setting == prefix or (prefix.endswith(".") and setting.startswith(prefix)):
                return _elasticsearch_only(what, f"index.{setting}: {value}", meaning, distribution)
    if elasticsearch:
        return None
    source = mappings.get("_source")
    if isinstance(source, dict) and "mode" in source:
        meaning = f"{source['mode']} _source"
        return _elasticsearch_only(what, "_source.mode", meaning, distribution)
    for parameter, meaning in ELASTICSEARCH_ROOT_PARAMETERS.items():
        if parameter in mappings:
            return _elasticsearch_only(what, f"mappings.{parameter}", meaning, distribution)
    for field, spec in _fields(mappings.get("properties")):
        for parameter, meaning in ELASTICSEARCH_FIELD_PARAMETERS.items():
            if parameter in spec:
                where = f"{parameter} on field {field}"
                return _elasticsearch_only(what, where, meaning, distribution)
    found = mapping_refusal({"mappings": dict(mappings)}, distribution)
    if found is not None:
        return Refusal(found.kind, f"{what}: {found.reason}", found.missing)
    return None


def _elasticsearch_only(what: str, where: str, meaning: str, distribution: Distribution) -> Refusal:
    """A ``mapper`` refusal for a feature of Elasticsearch's server (no module to name)."""
    return Refusal(
        "mapper",
        f"{what} uses {where} ({meaning}), which Elasticsearch has and {_lacks(distribution)}",
        where.split(" ", 1)[0].split(":", 1)[0],
    )


#: Index settings naming the ingest pipeline every document sent to the index goes through.
PIPELINE_SETTINGS = ("default_pipeline", "final_pipeline")


def pipelines_of(body: JsonMapping) -> list[tuple[str, str]]:
    """``(setting, pipeline)`` of the pipelines ``body``'s settings name (an index body or a
    template's own part)."""
    settings = body.get("settings")
    return [
        (f"index.{name}", value)
        for name, value in _flat(settings if isinstance(settings, dict) else {})
        if name in PIPELINE_SETTINGS and isinstance(value, str) and value != "_none"
    ]
