"""The plugin manager: built-ins, stamping, duplicates, broken plugins, blocking, hook docs.

Throw-away plugins are small classes handed to ``load_plugins(extra=...)``; they register real
:mod:`esdash.plugin_api` objects.  Installed third-party packages are covered by
``test_plugins_cli.py``.
"""

from __future__ import annotations

import inspect
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import pytest
from support.distributions import hookspecs, install_distribution

import esdash
from esdash.errors import EXIT_PLUGIN, PluginError
from esdash.plugin.manager import KINDS, PluginSet, load_plugins
from esdash.plugin_api import BrokenPlugin, Corpus, Interconnect, QueryStep, Track, hookimpl

GUIDE = Path(__file__).resolve().parents[1] / "docs" / "plugins.md"

#: (kind, item) -> the built-in entry point that registers it.
BUILTINS = {
    ("backend", "elasticsearch"): "elasticsearch",
    ("backend", "opensearch"): "opensearch",
    ("interconnect", "loopback"): "interconnects",
    ("interconnect", "ethernet"): "interconnects",
    ("interconnect", "opa"): "interconnects",
    ("interconnect", "infiniband"): "interconnects",
    ("encryption", "none"): "encryption-none",
    ("track", "mri"): "track-mri",
    ("track", "nyc_taxis"): "track-nyc-taxis",
}

HOOKS = hookspecs()


@pytest.fixture(autouse=True)
def _no_disabled_plugins(monkeypatch):
    monkeypatch.delenv("ESDASH_DISABLE_PLUGINS", raising=False)


class StubTrack(Track):
    description = "a track registered by a test plugin"

    def __init__(self, name: str) -> None:
        self.name = name

    def index_body(self, options: Mapping[str, Any]) -> dict[str, Any]:
        return {"mappings": {"dynamic": "strict", "properties": {}}}

    def corpus(self, options: Mapping[str, Any], cache_dir: Path) -> Corpus:
        return Corpus(cache_dir / f"{self.name}.ndjson")

    def query_steps(self, options: Mapping[str, Any]) -> tuple[QueryStep, ...]:
        return ()


class StubInterconnect(Interconnect):
    description = "an interconnect registered by a test plugin"
    patterns = ("lo",)

    def __init__(self, name: str) -> None:
        self.name = name


class TrackPlugin:
    """Registers one track per given name."""

    def __init__(self, *names: str) -> None:
        self.names = names

    @hookimpl
    def esdash_register_tracks(self, register) -> None:
        for name in self.names:
            register(StubTrack(name))


class NetworkAndTrackPlugin:
    """Registers an interconnect and a track: both kinds stand or fall together."""

    def __init__(self, interconnect: str, track: str) -> None:
        self.interconnect, self.track = interconnect, track

    @hookimpl
    def esdash_register_interconnects(self, register) -> None:
        register(StubInterconnect(self.interconnect))

    @hookimpl
    def esdash_register_tracks(self, register) -> None:
        register(StubTrack(self.track))


class SessionObserver:
    """Records lifecycle calls, to show whether a plugin stayed registered."""

    def __init__(self) -> None:
        self.calls: list[str] = []

    @hookimpl
    def esdash_session_started(self, session, run_dir) -> None:
        self.calls.append(session)


def broken(plugins: PluginSet, name: str) -> BrokenPlugin:
    found = [b for b in plugins.broken if b.name == name]
    assert found, f"{name!r} is not broken; broken: {plugins.broken}"
    return found[0]


def assert_builtins_intact(plugins: PluginSet) -> None:
    """One broken plugin never costs the others anything."""
    for (kind, name), plugin in BUILTINS.items():
        assert plugins.registries[kind][name].plugin == plugin, (kind, name, plugins.broken)


# ------------------------------------------------------------------------------ built-ins


def test_builtins_register_through_entry_points_and_are_stamped():
    plugins = load_plugins()
    assert not [b for b in plugins.broken if b.distribution == "esdash"], plugins.broken
    for (kind, name), plugin in BUILTINS.items():
        item = plugins.registries[kind].get(name)
        assert item is not None, f"built-in {kind} {name!r} missing; broken: {plugins.broken}"
        assert item.plugin == plugin
        assert item.kind == kind
        assert isinstance(item.obj, KINDS[kind][1])
        assert item.obj.name == name
        assert item.obj.description
        assert plugins.get(kind, name) is item.obj
        info = plugins.plugins[plugin]
        assert (info.distribution, info.version) == ("esdash", esdash.__version__)
        assert name in info.registered[kind]


def test_registries_and_plugin_listing_agree():
    plugins = load_plugins()
    for kind, registry in plugins.registries.items():
        for name, item in registry.items():
            assert name in plugins.plugins[item.plugin].registered[kind]
    for info in plugins.plugins.values():
        for kind, names in info.registered.items():
            assert all(plugins.registries[kind][name].plugin == info.name for name in names)


def test_disabled_entry_points_do_not_load(monkeypatch):
    monkeypatch.setenv("ESDASH_DISABLE_PLUGINS", "track-mri, interconnects")
    plugins = load_plugins()
    assert "track-mri" not in plugins.plugins
    assert "interconnects" not in plugins.plugins
    assert "mri" not in plugins.registries["track"]
    assert not plugins.registries["interconnect"]
    assert not [b for b in plugins.broken if b.name in ("track-mri", "interconnects")]
    assert plugins.registries["encryption"]["none"].plugin == "encryption-none"
    with pytest.raises(PluginError, match="no track called 'mri'"):
        plugins.track("mri")


def test_disabled_extra_plugins_do_not_load(monkeypatch):
    monkeypatch.setenv("ESDASH_DISABLE_PLUGINS", "extra")
    plugins = load_plugins(extra=[("extra", TrackPlugin("extra-track"))])
    assert "extra" not in plugins.plugins
    assert "extra-track" not in plugins.registries["track"]


# ----------------------------------------------------------------------------- duplicates


def test_duplicate_name_names_both_plugins_and_the_first_keeps_it():
    plugins = load_plugins(
        extra=[("first", TrackPlugin("twin")), ("second", TrackPlugin("twin", "only-second"))]
    )
    assert plugins.registries["track"]["twin"].plugin == "first"
    assert "first" in plugins.plugins
    error = broken(plugins, "second").error
    assert "track 'twin'" in error
    assert "plugin 'first' already registered" in error
    assert "ESDASH_DISABLE_PLUGINS=second" in error
    assert "second" not in plugins.plugins
    assert "only-second" not in plugins.registries["track"]
    assert_builtins_intact(plugins)


def test_duplicate_of_a_builtin_leaves_the_builtin_in_place():
    plugins = load_plugins(extra=[("shadow", NetworkAndTrackPlugin("shadow-net", "mri"))])
    assert "plugin 'track-mri' already registered" in broken(plugins, "shadow").error
    # The interconnect it registered first is withdrawn with it.
    assert "shadow-net" not in plugins.registries["interconnect"]
    assert_builtins_intact(plugins)


def test_plugin_registering_one_name_twice_is_broken():
    plugins = load_plugins(extra=[("stutter", TrackPlugin("echo", "echo"))])
    assert broken(plugins, "stutter").error == "registers track 'echo' twice"
    assert "echo" not in plugins.registries["track"]


def test_plugin_name_already_taken_is_broken_with_both_named():
    plugins = load_plugins(
        extra=[
            ("track-mri", TrackPlugin("impostor")),
            ("twice", TrackPlugin("a")),
            ("twice", TrackPlugin("b")),
        ]
    )
    assert "already taken by esdash" in broken(plugins, "track-mri").error
    assert "impostor" not in plugins.registries["track"]
    assert plugins.registries["track"]["a"].plugin == "twice"
    assert "b" not in plugins.registries["track"]
    assert [b.error for b in plugins.broken if b.name == "twice"] == [
        "the plugin name 'twice' is already taken by an extra plugin; plugin names "
        "(entry-point names) must be unique, rename one of them"
    ]
    assert_builtins_intact(plugins)


SHADOW_MODULE = """
from esdash.plugin_api import Track, hookimpl


class Shadow(Track):
    name = "mri"
    description = "a third-party track that wants a built-in's name"

    def index_body(self, options):
        return {}

    def corpus(self, options, cache_dir):
        return Corpus(Path(cache_dir) / "shadow.ndjson")  # never read: the name clash is the test

    def query_steps(self, options):
        return ()


@hookimpl
def esdash_register_tracks(register):
    register(Shadow())
"""


def test_third_party_plugin_cannot_take_a_builtin_name(tmp_path, monkeypatch):
    """Built-ins load first, though this entry point's name sorts before all of theirs."""
    install_distribution(tmp_path, "esdash-shadow", "aaa-shadow", SHADOW_MODULE)
    monkeypatch.syspath_prepend(str(tmp_path))
    plugins = load_plugins()
    shadow = broken(plugins, "aaa-shadow")
    assert (shadow.distribution, shadow.version) == ("esdash-shadow", "1.0")
    assert "registers track 'mri', which plugin 'track-mri' already registered" in shadow.error
    assert_builtins_intact(plugins)


# ------------------------------------------------------------------------ broken plugins


class TypoPlugin(SessionObserver):
    @hookimpl
    def esdash_register_trakcs(self, register) -> None:
        register(StubTrack("never"))


def test_misspelled_hook_is_a_broken_plugin_saying_typo():
    typo, observer = TypoPlugin(), SessionObserver()
    plugins = load_plugins(extra=[("typo", typo), ("observer", observer)])
    error = broken(plugins, "typo").error
    assert "typo?" in error
    assert "esdash_register_trakcs" in error
    assert not plugins.manager.has_plugin("typo")
    plugins.session_started(session="s1", run_dir=None)  # type: ignore[arg-type]
    assert (typo.calls, observer.calls) == ([], ["s1"])
    assert_builtins_intact(plugins)


class WrongArgumentPlugin(SessionObserver):
    @hookimpl
    def esdash_register_tracks(self, registry) -> None:
        registry(StubTrack("never"))


def test_hook_with_wrong_arguments_is_broken_and_fully_unregistered():
    plugin = WrongArgumentPlugin()
    plugins = load_plugins(extra=[("wrong-args", plugin)])
    error = broken(plugins, "wrong-args").error
    assert "esdash_register_tracks" in error and "registry" in error
    assert not plugins.manager.has_plugin("wrong-args")
    plugins.session_started(session="s1", run_dir=None)  # type: ignore[arg-type]
    assert plugin.calls == []
    assert_builtins_intact(plugins)


class RaisingPlugin:
    @hookimpl
    def esdash_register_tracks(self, register) -> None:
        register(StubTrack("half-done"))
        raise RuntimeError("corpus directory not configured")


def test_register_hook_that_raises_is_broken_and_registers_nothing():
    plugins = load_plugins(extra=[("raiser", RaisingPlugin()), ("fine", TrackPlugin("fine"))])
    error = broken(plugins, "raiser").error
    assert error.startswith(
        "esdash_register_tracks raised RuntimeError: corpus directory not configured ("
    )
    assert "test_plugins.py:" in error
    assert "half-done" not in plugins.registries["track"]
    assert plugins.registries["track"]["fine"].plugin == "fine"
    assert_builtins_intact(plugins)


class WrongTypePlugin:
    def __init__(self, obj: object) -> None:
        self.obj = obj

    @hookimpl
    def esdash_register_tracks(self, register) -> None:
        register(self.obj)


@pytest.mark.parametrize(
    ("obj", "found"), [("weblogs", "str"), (StubInterconnect("net"), "StubInterconnect")]
)
def test_registering_the_wrong_type_is_broken_with_a_clear_message(obj, found):
    plugins = load_plugins(extra=[("wrong-type", WrongTypePlugin(obj))])
    error = broken(plugins, "wrong-type").error
    assert (
        f"register() in esdash_register_tracks expects a esdash.plugin_api.Track, got {found}"
        in error
    )
    assert_builtins_intact(plugins)


def test_get_unknown_name_lists_available_names_and_broken_plugins():
    plugins = load_plugins(extra=[("typo", TypoPlugin())])
    with pytest.raises(PluginError) as caught:
        plugins.track("weblogs")
    message = str(caught.value)
    assert message.startswith("no track called 'weblogs' is registered (available: ")
    assert "mri" in message
    assert (
        "Broken plugins, one of which may provide it: typo: implements an unknown hook" in message
    )
    assert caught.value.exit_code == EXIT_PLUGIN


def test_get_a_misspelt_name_suggests_the_registered_one():
    with pytest.raises(PluginError) as caught:
        load_plugins().backend("elasticserch")
    assert str(caught.value).startswith(
        "no backend called 'elasticserch' is registered (did you mean \"elasticsearch\"?)"
    )


# ------------------------------------------------------------------------------ contract


def test_every_hookspec_is_documented():
    assert HOOKS, "no hookspecs found in esdash.plugin.spec"
    for name, function in HOOKS.items():
        assert name.startswith("esdash_"), name
        doc = inspect.getdoc(function) or ""
        assert len(doc.split()) >= 10, f"hookspec {name} needs a docstring: it is the reference"


def test_every_registration_hook_has_a_kind():
    registering = {name for name in HOOKS if name.startswith("esdash_register_")}
    assert registering == {hook for hook, _ in KINDS.values()}


def test_plugin_guide_covers_every_hook():
    guide = GUIDE.read_text(encoding="utf-8")
    missing = [name for name in HOOKS if f"`{name}" not in guide]
    assert not missing, f"{GUIDE} does not mention {missing}"
