"""Everything a plugin uses, in one module: the only esdash module a plugin imports.

A plugin package (built-in or third-party) writes::

    from esdash.plugin_api import Track, Corpus, Query, QueryStep, hookimpl

and implements hooks of :mod:`esdash.plugin.spec`.  What is here is the plugin contract;
esdash's other modules may change between versions without notice to plugin authors, this
one only with a changelog entry.  (esdash's own core never imports this module: it uses
:mod:`esdash.plugin` directly, so a plugin cannot depend on anything the core does not
export here.)

Contents, by what a plugin provides:

* every plugin: :data:`hookimpl`, :class:`Option` and :data:`REQUIRED` (session keys),
  the errors (:class:`BadInput` for bad options, :class:`ClusterError`, :class:`EsdashError`);
* a **track**: :class:`Track`, :class:`Corpus`, :class:`FieldSpec`, :class:`Query`,
  :class:`QueryStep`; corpus helpers (:func:`generated_corpus`, :func:`write_atomically`,
  :func:`check_corpus`) and the query-file format (:func:`load_steps`, :func:`parse_steps`);
* a **backend**: :class:`Backend`, :class:`Distribution`, :class:`NodeRequest`,
  :class:`NodeCommand`, :class:`NodeDirs`, :class:`Owner`, the cluster plan
  (:class:`Topology`, :class:`NodePlan`), the control-client contract
  (:class:`ControlClient`, :class:`ControlError`, :class:`EngineInfo`, :func:`engine_of`);
* an **encryption mode**: :class:`EncryptionMode`, :class:`ClientCodec`,
  :class:`QueryNotSupported`;
* an **interconnect**: :class:`Interconnect`, :class:`Endpoint`,
  :class:`InterconnectError`, :func:`interface_addresses`;
* a **pre-flight check**: :class:`PreflightCheck`, :class:`CheckContext`, :class:`Finding`;
* a plugin's **tests**: :func:`load_plugins` (``extra=[(name, module)]`` loads a module that
  is not installed) and the :class:`PluginSet` it returns.
"""

from __future__ import annotations

from esdash.errors import BadInput, ClusterError, EsdashError
from esdash.plugin.api import (
    REQUIRED,
    Backend,
    BrokenPlugin,
    ClientCodec,
    Corpus,
    Distribution,
    EncryptionMode,
    Endpoint,
    FieldSpec,
    Interconnect,
    InterconnectError,
    NodeCommand,
    NodeDirs,
    NodeRequest,
    Option,
    Owner,
    PluginInfo,
    Query,
    QueryNotSupported,
    QueryStep,
    Registrable,
    Track,
    interface_addresses,
)
from esdash.plugin.checks import CheckContext, Finding, PreflightCheck
from esdash.plugin.control import ControlClient, ControlError, EngineInfo, engine_of
from esdash.plugin.corpus import check_corpus, generated_corpus, write_atomically
from esdash.plugin.manager import PluginSet, load_plugins
from esdash.plugin.spec import hookimpl
from esdash.plugin.steps import load_steps, parse_steps
from esdash.rundir.records import NodePlan, Topology

__all__ = [
    "REQUIRED",
    "Backend",
    "BadInput",
    "BrokenPlugin",
    "CheckContext",
    "ClientCodec",
    "ClusterError",
    "ControlClient",
    "ControlError",
    "Corpus",
    "Distribution",
    "EncryptionMode",
    "EngineInfo",
    "Endpoint",
    "EsdashError",
    "FieldSpec",
    "Finding",
    "Interconnect",
    "InterconnectError",
    "NodeCommand",
    "NodeDirs",
    "NodePlan",
    "NodeRequest",
    "Option",
    "Owner",
    "PluginInfo",
    "PluginSet",
    "PreflightCheck",
    "Query",
    "QueryNotSupported",
    "QueryStep",
    "Registrable",
    "Topology",
    "Track",
    "check_corpus",
    "engine_of",
    "generated_corpus",
    "hookimpl",
    "interface_addresses",
    "load_plugins",
    "load_steps",
    "parse_steps",
    "write_atomically",
]
