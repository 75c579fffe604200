"""What a refused administrative task takes down with it: the indices it would have made.

A plan refuses a template or pipeline task the distribution cannot serve
(:func:`esdash_plugins.tracks.rally.requests.refusal`).  The run would go on without it, but
what depends on it would not work: a data stream whose composable template (or one of its
component templates) is refused is never made, and an index whose ``index.default_pipeline``
names a refused pipeline rejects every document (``pipeline with id [...] does not exist``).
These functions find that dependence, so the plan refuses the whole run with the reason,
instead of a run whose every document is rejected.  Index bodies are checked here too, for
what their settings and mappings ask beyond field types.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from fnmatch import fnmatchcase
from urllib.parse import unquote

from esdash.plugin_api import Distribution, JsonMapping, JsonValue, Refusal

from . import requests as rr
from .compat import body_refusal, pipelines_of


def _last(path: str) -> str:
    """The name a request path ends with (``/_ingest/pipeline/p?x=1`` -> ``p``)."""
    return unquote(path.split("?", 1)[0].rstrip("/").rsplit("/", 1)[-1])


def _strings(value: JsonValue) -> list[str]:
    """A name or a list of names (anything else: none)."""
    if isinstance(value, str):
        return [value]
    return [v for v in value if isinstance(v, str)] if isinstance(value, list) else []


def _templates(one_offs: Sequence[rr.OneOff], name: str) -> Iterator[list[rr.OneOff]]:
    """For each template request of the track whose patterns match index ``name``: the
    requests that make it (a composable template's component templates first)."""
    components = {
        _last(one.path): one
        for one in one_offs
        if one.method == "PUT" and one.path.startswith("/_component_template/")
    }
    for one in one_offs:
        body = one.body if isinstance(one.body, dict) else {}
        patterns = _strings(body.get("index_patterns"))
        if one.method != "PUT" or not any(fnmatchcase(name, p) for p in patterns):
            continue
        if one.path.startswith("/_template/"):
            yield [one]
        elif one.path.startswith("/_index_template/"):
            composed = _strings(body.get("composed_of"))
            yield [*(components[c] for c in composed if c in components), one]


def stream_refusal(
    one_offs: Sequence[rr.OneOff], stream: str, distribution: Distribution | None
) -> Refusal | None:
    """Why ``distribution`` cannot make data stream ``stream`` from the track's templates
    (None: it can, as far as the templates tell): a composable template matching it, or one
    of its component templates, is refused, so the stream is never made."""
    for made_of in _templates(one_offs, stream):
        for one in made_of:
            found = rr.refusal(one, distribution)
            if found is not None:
                return Refusal(
                    found.kind,
                    f"data stream {stream} cannot be made ({one.name} is refused): {found.reason}",
                    found.missing,
                )
    return None


def index_refusal(
    name: str, body: JsonMapping, distribution: Distribution | None
) -> Refusal | None:
    """Why ``distribution`` cannot create index ``name`` with ``body`` for what its settings
    and mappings ask beyond field types (an index mode, synthetic ``_source``, an ILM
    policy: :func:`~esdash_plugins.tracks.rally.compat.body_refusal`)."""
    if distribution is None:
        return None
    return body_refusal(f"index {name}", body, distribution, rr.is_elasticsearch(distribution))


def pipeline_refusal(
    one_offs: Sequence[rr.OneOff],
    targets: Sequence[tuple[str, JsonMapping]],
    distribution: Distribution | None,
) -> Refusal | None:
    """Why every document sent to one of ``targets`` (``(name, index body)``: the indices
    and data streams the ingest fills) would be rejected: its body, or a template matching
    it, names a pipeline (``index.default_pipeline``, ``index.final_pipeline``) whose
    ``put-pipeline`` task the plan refuses.  None: no such pipeline."""
    refused: dict[str, tuple[rr.OneOff, Refusal]] = {}
    for one in one_offs:
        if one.method == "PUT" and one.path.startswith("/_ingest/pipeline/"):
            found = rr.refusal(one, distribution)
            if found is not None:
                refused[_last(one.path)] = (one, found)
    if not refused:
        return None
    for name, body in targets:
        parts: list[tuple[str, JsonMapping]] = [(f"index {name}", body)]
        for made_of in _templates(one_offs, name):
            for one in made_of:
                own = one.body if isinstance(one.body, dict) else {}
                part = own if one.path.startswith("/_template/") else own.get("template")
                what = f"the template task {one.name} puts"
                parts.append((what, part if isinstance(part, dict) else {}))
        for what, part in parts:
            for setting, pipeline in pipelines_of(part):
                if pipeline in refused:
                    sender, found = refused[pipeline]
                    return Refusal(
                        found.kind,
                        f"every document sent to {name} goes through pipeline {pipeline} "
                        f"({setting} of {what}), which is never put ({sender.name} is "
                        f"refused): {found.reason}",
                        found.missing,
                    )
    return None
