"""Tests of esdash-example-plugin, written the way a plugin author tests a plugin.

Run them from the package directory after ``pip install -e '.[test]'``::

    pytest
"""

from __future__ import annotations

import json
from datetime import datetime, timedelta

import esdash_example_plugin as example
import pytest

from esdash.plugin_api import InterconnectError, load_plugins

# ----------------------------------------------------------------- the plugin in esdash


def test_installed_entry_point_registers_track_and_interconnect():
    """The package is installed: esdash finds it through the ``esdash`` entry-point group."""
    plugins = load_plugins()
    assert "example" in plugins.plugins, f"not loaded; broken plugins: {plugins.broken}"
    info = plugins.plugins["example"]
    assert info.distribution == "esdash-example-plugin"
    assert info.registered == {"track": ["weblogs"], "interconnect": ["roce"]}
    assert isinstance(plugins.track("weblogs"), example.WeblogsTrack)
    assert isinstance(plugins.interconnect("roce"), example.RoCE)


def test_module_loads_as_an_extra_plugin(monkeypatch):
    """``load_plugins(extra=...)`` loads a plugin object directly, installed or not.

    The installed entry point is switched off, so the module is registered only once.
    """
    monkeypatch.setenv("ESDASH_DISABLE_PLUGINS", "example")
    plugins = load_plugins(extra=[("example-under-test", example)])
    assert not [b for b in plugins.broken if b.name == "example-under-test"]
    assert plugins.registries["track"]["weblogs"].plugin == "example-under-test"
    assert plugins.registries["interconnect"]["roce"].plugin == "example-under-test"


# ----------------------------------------------------------------------------- weblogs


def test_mapping_is_strict_and_matches_the_schema():
    body = example.WeblogsTrack().index_body({})
    mappings = body["mappings"]
    assert mappings["dynamic"] == "strict"
    assert set(mappings["properties"]) == {spec.path for spec in example.FIELDS}
    assert mappings["properties"]["status"] == {"type": "integer"}


def test_options_reach_the_index_settings():
    body = example.WeblogsTrack().index_body({"shards": 4, "replicas": 1, "refresh_interval": 0.25})
    assert body["settings"] == {
        "number_of_shards": 4,
        "number_of_replicas": 1,
        "refresh_interval": "250ms",
    }


def test_option_defaults_respect_their_own_bounds():
    for option in example.WeblogsTrack.options:
        if option.minimum is not None:
            assert option.default >= option.minimum, option.name
        if option.maximum is not None:
            assert option.default <= option.maximum, option.name


def test_documents_follow_the_schema():
    track = example.WeblogsTrack()
    docs = list(track.documents({"documents": 2000, "days": 2}))
    assert len(docs) == 2000
    specs = {spec.path: spec for spec in example.FIELDS}
    for doc in docs:
        assert set(doc) == set(specs)
        for path, spec in specs.items():
            if spec.minimum is not None:
                assert spec.minimum <= doc[path] <= spec.maximum, (path, doc[path])
    stamps = [datetime.fromisoformat(doc["@timestamp"]) for doc in docs]
    assert stamps == sorted(stamps)
    assert stamps[0] >= example.START and stamps[-1] < example.START + timedelta(days=2)


def test_documents_are_reproducible_and_honour_the_error_rate():
    track = example.WeblogsTrack()
    first = list(track.documents({"documents": 300, "seed": 9}))
    assert first == list(track.documents({"documents": 300, "seed": 9}))
    assert first != list(track.documents({"documents": 300, "seed": 10}))
    healthy = track.documents({"documents": 300, "error_rate": 0.0})
    assert all(doc["status"] < 400 for doc in healthy)
    failing = track.documents({"documents": 300, "error_rate": 1.0})
    assert all(doc["status"] >= 400 for doc in failing)


def test_corpus_is_written_once_and_reused(tmp_path):
    track = example.WeblogsTrack()
    corpus = track.corpus({"documents": 50, "seed": 3}, tmp_path)
    assert corpus.documents == 50
    lines = corpus.path.read_text(encoding="utf-8").splitlines()
    assert [json.loads(line) for line in lines] == list(
        track.documents({"documents": 50, "seed": 3})
    )
    mtime = corpus.path.stat().st_mtime_ns
    assert track.corpus({"documents": 50, "seed": 3}, tmp_path).path == corpus.path
    assert corpus.path.stat().st_mtime_ns == mtime
    assert track.corpus({"documents": 50, "seed": 4}, tmp_path).path != corpus.path
    assert [p.name for p in tmp_path.iterdir() if p.name.endswith(".tmp")] == []


def test_query_steps_name_their_queries():
    steps = example.WeblogsTrack().query_steps({})
    assert [step.name for step in steps] == ["errors", "search", "status_histogram"]
    assert all(step.queries and step.warmup is None for step in steps)


# -------------------------------------------------------------------------------- roce


def test_roce_binds_an_explicit_interface():
    """``cluster.interface`` wins over the patterns; the loopback exists on every host."""
    endpoint = example.RoCE().resolve("lo")
    assert endpoint.interface == "lo"
    assert endpoint.address.startswith("127.")


#: A host's interface table, given to ``resolve`` in place of this machine's: test machines
#: have no RDMA-capable Ethernet ports.
ROCE_HOST = {"lo": "127.0.0.1", "eno1": "192.0.2.7", "ens1f0np0": "10.20.0.7"}


def test_roce_finds_the_port_by_its_name():
    endpoint = example.RoCE().resolve(addresses=ROCE_HOST)
    assert (endpoint.interface, endpoint.address) == ("ens1f0np0", "10.20.0.7")


def test_roce_explains_a_host_without_it():
    host = {"lo": "127.0.0.1", "eno1": "192.0.2.7"}
    with pytest.raises(InterconnectError, match=r"roce: no interface on host .* matches roce\*"):
        example.RoCE().resolve(addresses=host)
