"""Loading plugins and collecting what they register.

Built-in plugins (package ``esdash_plugins``) and third-party ones are found the same way:
through the entry-point group ``esdash``.  One broken plugin never stops the others: a plugin
that fails to import, implements a hook that does not exist, raises while registering, or
registers a name another plugin already took is recorded as a :class:`BrokenPlugin` and shown
by ``esdash plugins``; a session that needs it fails before anything is launched.

``ESDASH_DISABLE_PLUGINS=name1,name2`` keeps the named entry points from loading.
"""

from __future__ import annotations

import importlib.metadata
import os
import sys
import traceback
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, cast

import msgspec
import pluggy

from esdash.errors import PluginError
from esdash.plugin import spec
from esdash.plugin.api import (
    Backend,
    BrokenPlugin,
    ClientCodec,
    EncryptionMode,
    Interconnect,
    PluginInfo,
    Track,
)
from esdash.plugin.checks import PreflightCheck
from esdash.plugin.options import suggest
from esdash.plugin.values import Corpus
from esdash.rundir.layout import LEAKAGE
from esdash.rundir.records import Interval, Leakage, Results

if TYPE_CHECKING:
    from esdash.plugin.session import Session

ENTRY_POINT_GROUP = "esdash"

#: Anything a plugin can register (the base classes of :data:`KINDS`).
Registrable = Backend | Interconnect | EncryptionMode | Track | PreflightCheck

#: Registration hook per kind, and the class registered objects must derive from.
KINDS: dict[str, tuple[str, type[Registrable]]] = {
    "backend": ("esdash_register_backends", Backend),
    "interconnect": ("esdash_register_interconnects", Interconnect),
    "encryption": ("esdash_register_encryption_modes", EncryptionMode),
    "track": ("esdash_register_tracks", Track),
    "check": ("esdash_register_checks", PreflightCheck),
}


@dataclass(frozen=True)
class Registered:
    """A registered object stamped with the plugin that gave it."""

    kind: str
    name: str
    obj: Registrable
    plugin: str


@dataclass
class PluginSet:
    """Everything loaded: plugins, broken plugins and the registries of each kind."""

    manager: pluggy.PluginManager
    plugins: dict[str, PluginInfo] = field(default_factory=dict)
    broken: list[BrokenPlugin] = field(default_factory=list)
    registries: dict[str, dict[str, Registered]] = field(
        default_factory=lambda: {kind: {} for kind in KINDS}
    )

    def get(self, kind: str, name: str) -> Registrable:
        """The object of ``kind`` (a key of :data:`KINDS`) called ``name``, or a
        :class:`PluginError` saying why there is none."""
        registry = self.registries[kind]
        if name in registry:
            return registry[name].obj
        hint = ", ".join(sorted(registry)) or "none"
        broken = "; ".join(f"{b.name}: {b.error}" for b in self.broken)
        close = suggest(name, list(registry))
        message = f"no {kind} called {name!r} is registered{close} (available: {hint})"
        if broken:
            message += f". Broken plugins, one of which may provide it: {broken}"
        raise PluginError(message)

    # Each registry holds instances of its kind's class (checked when they were registered,
    # by _stamping_register), so these casts only tell the type checker what is known.

    def backend(self, name: str) -> Backend:
        return cast(Backend, self.get("backend", name))

    def interconnect(self, name: str) -> Interconnect:
        return cast(Interconnect, self.get("interconnect", name))

    def encryption(self, name: str) -> EncryptionMode:
        return cast(EncryptionMode, self.get("encryption", name))

    def track(self, name: str) -> Track:
        return cast(Track, self.get("track", name))

    def checks(self) -> list[PreflightCheck]:
        """Every registered pre-flight check, in registration order."""
        registered = self.registries["check"].values()
        return [item.obj for item in registered if isinstance(item.obj, PreflightCheck)]

    def names(self, kind: str) -> list[str]:
        return sorted(self.registries[kind])

    # ------------------------------------------------------------------- observers
    def session_started(self, session: Session, run_dir: Path) -> None:
        self._notify("esdash_session_started", session=session, run_dir=run_dir)

    def interval(self, session: Session, record: Interval) -> None:
        self._notify("esdash_interval", session=session, record=record)

    def session_finished(self, session: Session, run_dir: Path, results: Results | None) -> None:
        self._notify("esdash_session_finished", session=session, run_dir=run_dir, results=results)

    def leakage(
        self, session: Session, run_dir: Path, track: Track, corpus: Corpus, codec: ClientCodec
    ) -> Leakage | None:
        """The leakage report of the plugin whose ``codec`` it is, checked; or None.

        The implementations are called one by one, in pluggy's order, until one answers
        (``firstresult``), so that a failure names its plugin: a plugin that raises is a
        warning and the next one is asked; a report that does not match the
        :class:`~esdash.rundir.records.Leakage` record is a warning naming the plugin and the
        JSON path, and gives None.  Nothing here stops a run.
        """
        arguments: dict[str, object] = {
            "session": session,
            "run_dir": run_dir,
            "track": track,
            "corpus": corpus,
            "codec": codec,
        }
        hook = "esdash_leakage"
        for impl in reversed(getattr(self.manager.hook, hook).get_hookimpls()):
            if impl.hookwrapper or impl.wrapper:
                continue  # esdash declares no wrappers; a plugin's would see no call
            try:
                answer = impl.function(*(arguments[name] for name in impl.argnames))
            except Exception as exc:  # a plugin may fail in any way
                _warn(f"plugin {impl.plugin_name!r}: {hook} failed: {type(exc).__name__}: {exc}")
                continue
            if answer is None:
                continue
            try:
                return msgspec.convert(answer, type=Leakage)
            except msgspec.ValidationError as exc:
                _warn(
                    f"plugin {impl.plugin_name!r}: {hook} returned a report that is not a "
                    f"valid {LEAKAGE}: {exc}"
                )
                return None
        return None

    def _notify(self, hook: str, **arguments: object) -> None:
        """Call an observer hook; a failing observer is reported, never stops the run."""
        try:
            getattr(self.manager.hook, hook)(**arguments)
        except Exception as exc:  # a plugin may fail in any way
            _warn(f"a plugin's {hook} failed: {type(exc).__name__}: {exc}")


def _warn(text: str) -> None:
    """One warning line on stderr, as every observer failure is reported."""
    print(f"esdash: warning: {text}", file=sys.stderr)


def _disabled() -> set[str]:
    raw = os.environ.get("ESDASH_DISABLE_PLUGINS", "")
    return {part.strip() for part in raw.split(",") if part.strip()}


def _error_text(exc: BaseException) -> str:
    """One line naming the exception and where it was raised, for the plugin listing."""
    frames = traceback.extract_tb(exc.__traceback__)
    where = f" ({frames[-1].filename}:{frames[-1].lineno})" if frames else ""
    return f"{type(exc).__name__}: {exc}{where}"


def load_plugins(extra: Iterable[tuple[str, object]] = ()) -> PluginSet:
    """Load every plugin of the ``esdash`` entry-point group, plus ``extra`` (name, object) pairs.

    ``extra`` lets tests and embedding code add plugins without packaging them.  Plugins load
    in this order: built-ins, other entry points by name, then ``extra`` in the order given;
    of two plugins registering the same name, the one loaded first keeps it.
    """
    manager = pluggy.PluginManager(spec.PROJECT)
    manager.add_hookspecs(spec)
    plugin_set = PluginSet(manager)
    disabled = _disabled()
    for name in disabled:
        manager.set_blocked(name)

    candidates: list[tuple[str, Callable[[], object], str | None, str | None]] = []
    # Built-ins first: when two plugins register one name the first keeps it, so a
    # third-party plugin can never take a built-in's name.  Then by name, reproducibly.
    entry_points = sorted(
        importlib.metadata.entry_points(group=ENTRY_POINT_GROUP),
        key=lambda ep: (ep.dist is None or ep.dist.name != "esdash", ep.name),
    )
    for ep in entry_points:
        dist = ep.dist.name if ep.dist else None
        version = ep.dist.version if ep.dist else None
        candidates.append((ep.name, ep.load, dist, version))
    for name, obj in extra:
        candidates.append((name, _given(obj), None, None))

    for name, load, dist, version in candidates:
        if name in disabled:
            continue
        if name in plugin_set.plugins:
            owner = plugin_set.plugins[name].distribution or "an extra plugin"
            plugin_set.broken.append(
                BrokenPlugin(
                    name,
                    dist,
                    version,
                    f"the plugin name {name!r} is already taken by {owner}; plugin names "
                    f"(entry-point names) must be unique, rename one of them",
                )
            )
            continue
        try:
            obj = load()
            manager.register(obj, name=name)
        except Exception as exc:  # a plugin may fail in any way; record it and go on
            if manager.get_plugin(name) is not None:
                # pluggy < 1.7 leaves a plugin half-registered when a hookimpl fails validation
                manager.unregister(name=name)
            plugin_set.broken.append(BrokenPlugin(name, dist, version, _error_text(exc)))
            continue
        try:
            manager.check_pending()
        except pluggy.PluginValidationError as exc:
            manager.unregister(name=name)
            plugin_set.broken.append(
                BrokenPlugin(name, dist, version, f"implements an unknown hook (typo?): {exc}")
            )
            continue
        plugin_set.plugins[name] = PluginInfo(name, dist, version)

    _collect(plugin_set)
    return plugin_set


def _given(obj: object) -> Callable[[], object]:
    """The loader of an ``extra`` plugin: it is already there."""
    return lambda: obj


def _collect(plugin_set: PluginSet) -> None:
    """Call every registration hook plugin by plugin, stamping each object with its plugin."""
    manager = plugin_set.manager
    for kind, (hook_name, base) in KINDS.items():
        caller = getattr(manager.hook, hook_name)
        for impl in caller.get_hookimpls():
            plugin_name = manager.get_name(impl.plugin)
            if plugin_name not in plugin_set.plugins:
                continue  # already found broken by an earlier kind
            staged: list[Registered] = []
            register = _stamping_register(staged, plugin_name, kind, hook_name, base)
            try:
                impl.function(register=register)
            except Exception as exc:
                _mark_broken(plugin_set, plugin_name, f"{hook_name} raised {_error_text(exc)}")
                continue
            registry = plugin_set.registries[kind]
            seen: set[str] = set()
            for item in staged:
                if item.name in seen:
                    _mark_broken(plugin_set, plugin_name, f"registers {kind} {item.name!r} twice")
                    break
                if item.name in registry:
                    owner = registry[item.name].plugin
                    _mark_broken(
                        plugin_set,
                        plugin_name,
                        f"registers {kind} {item.name!r}, which plugin {owner!r} already "
                        f"registered; rename one of them or disable one plugin with "
                        f"ESDASH_DISABLE_PLUGINS={plugin_name}",
                    )
                    break
                seen.add(item.name)
            else:
                for item in staged:
                    registry[item.name] = item
                info = plugin_set.plugins[plugin_name]
                info.registered.setdefault(kind, []).extend(item.name for item in staged)


def _stamping_register(
    staged: list[Registered], plugin: str, kind: str, hook_name: str, base: type[Registrable]
) -> Callable[[object], None]:
    """The ``register`` callable handed to one plugin's registration hook."""

    def register(obj: object) -> None:
        if not isinstance(obj, base):
            raise TypeError(
                # named as plugins import it
                f"register() in {hook_name} expects a esdash.plugin_api.{base.__name__}, "
                f"got {type(obj).__name__}"
            )
        staged.append(Registered(kind, obj.name, obj, plugin))

    return register


def _mark_broken(plugin_set: PluginSet, plugin_name: str, error: str) -> None:
    """Move a loaded plugin to the broken list and withdraw what it registered."""
    info = plugin_set.plugins.pop(plugin_name)
    for registry in plugin_set.registries.values():
        for name in [n for n, item in registry.items() if item.plugin == plugin_name]:
            del registry[name]
    plugin_set.manager.unregister(name=plugin_name)
    plugin_set.broken.append(BrokenPlugin(info.name, info.distribution, info.version, error))


_cached: PluginSet | None = None


def get_plugins() -> PluginSet:
    """The process-wide plugin set, loaded on first use."""
    global _cached
    if _cached is None:
        _cached = load_plugins()
    return _cached
