"""Everything a plugin uses, in one module: the only esdash module a plugin imports.

A plugin package (built-in or third-party) writes::

    from esdash.plugin_api import Track, Corpus, Query, QueryStep, hookimpl

and implements hooks of :mod:`esdash.plugin.spec`.  What is here is the plugin contract;
esdash's other modules may change between versions without notice to plugin authors, this
one only with a changelog entry (``docs/plugin-api-changes.md``).  (esdash's own core never
imports this module: it uses :mod:`esdash.plugin` directly, so a plugin cannot depend on
anything the core does not export here.)

Contents, by what a plugin provides:

* every plugin: :data:`hookimpl`, :class:`Option` and :data:`REQUIRED` (session keys, whose
  values a plugin receives as :data:`OptionValues`), the errors (:class:`BadInput` for bad
  options, :class:`ClusterError`, :class:`EsdashError`);
* the validated **session** the observer hooks and pre-flight checks are handed:
  :class:`Session` and its parts (:class:`PluginChoice` for the backend, encryption mode and
  track chosen with their options, :class:`ClusterSpec`, :class:`BenchmarkSpec`,
  :class:`SlurmSpec`);
* JSON as parsed (documents, mappings, query bodies, track files): :data:`JsonObject`,
  :data:`JsonMapping` (read-only) and :data:`JsonValue` (any one value);
* a **track**: :class:`Track` (one that generates its corpus and takes its index's
  :data:`SHARDS` and :data:`REPLICAS` from options: :class:`GeneratedTrack`, its
  :data:`Generator`), :class:`Corpus`, :class:`FieldSpec`, :class:`Query`,
  :class:`QueryStep` (:class:`StepIndexing`: documents indexed during a step, from
  :meth:`Track.step_corpora`); its plan (:class:`PlannedTask`, :data:`REASON_KINDS`, and what a
  distribution lacks: :func:`query_refusal`, :func:`operation_refusal`,
  :func:`mapping_refusal` giving a :class:`Refusal`, :func:`adaptation_note`,
  :func:`plan_of_steps`) and what it can say of
  its corpus without writing files (:class:`CorpusStatus`); corpus helpers
  (:func:`generated_corpus`, :func:`write_atomically`, :func:`keep_private` and
  :func:`reuse_privately` for private cache files, :func:`check_corpus`,
  :func:`read_regular` that refuses a FIFO instead of blocking on it) and the
  query-file format (:func:`load_steps`, :func:`parse_steps`);
* a **backend**: :class:`Backend`, :class:`Distribution`, :class:`NodeRequest`,
  :class:`NodeCommand`, :class:`NodeDirs`, :class:`Owner`, the cluster plan
  (:class:`Topology`, :class:`NodePlan`), the control-client contract
  (:class:`ControlClient`, :class:`ControlError`, :class:`EngineInfo`, :func:`engine_of`)
  and its implementation over an engine's official client (:class:`EngineControl`, which a
  backend fills in: :class:`ApiCall`, :data:`ClientApi`, :data:`UNBOUNDED`,
  :func:`engine_reason`);
* an **encryption mode**: :class:`EncryptionMode`, :class:`ClientCodec`,
  :class:`QueryNotSupported`; and the privilege boundary for whatever it does, as root, in
  directories the node account can write: :class:`Dir` (by descriptor, never following a
  link), :class:`BoundaryViolation`, :func:`describe`, :func:`make_dirs`;
* an **interconnect**: :class:`Interconnect`, :class:`Endpoint`,
  :class:`InterconnectError`, :func:`interface_addresses`;
* a backend's **security**: :class:`NodeSecurity` (TLS files, :class:`Credentials`),
  :class:`TlsFiles`, and the private-file helpers (:func:`write_private`,
  :func:`make_private_dir`, :func:`owner_ids`, :class:`SecurityFilesError`);
* a backend's **distribution**: :func:`default_distribution` (the newest one of an engine in
  esdash's cache: what a session without ``cluster.home`` runs), :func:`find_maven`,
  :func:`maven_copy` and :func:`run_maven` (every download checked against its published
  checksum), :func:`unzip_keeping_modes`, :func:`make_world_readable`, :func:`workspace`,
  :func:`install_into_cache`, :class:`FetchError`; Java: :func:`find_java`,
  :func:`java_version`, :func:`java_check`, :class:`JavaRuntime`; the JVM's own files
  (heap dumps, crash files, GC logs) put in one place: :func:`point_jvm_files`;
  a JVM engine's node (Elasticsearch, OpenSearch and their kin): :class:`JvmBackend`, the
  backend base that writes it from :class:`JvmEngine`'s names (with
  :data:`ELASTICSEARCH_NAMES`, :data:`OPENSEARCH_NAMES`; its TLS files :data:`NODE_KEY`,
  :data:`NODE_CERT`, :data:`NODE_CA_CERT` in :data:`NODE_CERTS_DIR`), :func:`jvm_node_settings`,
  :func:`write_jvm_node_config`; and its distribution's layout: :func:`read_distribution`
  (giving :class:`Unpacked`), :func:`engine_version`, :func:`is_jvm_distribution`,
  :func:`unpack_integ_test_zip`;
* **doctor checks** (backends and encryption modes): :class:`HostCheck`, :class:`HostProbe`,
  :func:`run_as_user`, :func:`last_line`, :func:`shorten`, :func:`user_name`,
  :func:`group_name`; a JVM engine's distribution and node user: :func:`distribution_check`,
  :func:`node_user_check`, :func:`unreadable_paths`, :func:`assumed_version`;
* a **pre-flight check**: :class:`PreflightCheck`, :class:`CheckContext`, :class:`Finding`;
* a plugin's **tests**: :func:`load_plugins` (``extra=[(name, module)]`` loads a module that
  is not installed) and the :class:`PluginSet` it returns.
"""

from __future__ import annotations

from esdash.boundary import BoundaryViolation, Dir, describe, make_dirs
from esdash.errors import BadInput, ClusterError, EsdashError
from esdash.paths import default_distribution
from esdash.plugin.api import (
    Backend,
    BrokenPlugin,
    ClientCodec,
    EncryptionMode,
    Interconnect,
    InterconnectError,
    PluginInfo,
    QueryNotSupported,
    Registrable,
    Track,
    interface_addresses,
)
from esdash.plugin.checks import CheckContext, Finding, PreflightCheck
from esdash.plugin.control import (
    ELASTICSEARCH,
    OPENSEARCH,
    ControlClient,
    ControlError,
    EngineInfo,
    engine_of,
)
from esdash.plugin.corpus import (
    check_corpus,
    generated_corpus,
    keep_private,
    reuse_privately,
    write_atomically,
)
from esdash.plugin.engine_control import (
    UNBOUNDED,
    ApiCall,
    ClientApi,
    EngineControl,
    engine_reason,
)
from esdash.plugin.fetching import (
    FetchError,
    MavenMissing,
    find_maven,
    install_into_cache,
    make_world_readable,
    maven_copy,
    run_maven,
    unzip_keeping_modes,
    workspace,
)
from esdash.plugin.generated_track import REPLICAS, SHARDS, GeneratedTrack, Generator
from esdash.plugin.host import (
    HostCheck,
    HostProbe,
    group_name,
    last_line,
    run_as_user,
    shorten,
    user_name,
)
from esdash.plugin.java import (
    JavaRuntime,
    JavaVersion,
    find_java,
    java_check,
    java_version,
    point_jvm_files,
)
from esdash.plugin.jvm_distribution import (
    Unpacked,
    engine_version,
    is_jvm_distribution,
    read_distribution,
    unpack_integ_test_zip,
)
from esdash.plugin.jvm_doctor import (
    assumed_version,
    distribution_check,
    node_user_check,
    unreadable_paths,
)
from esdash.plugin.jvm_engine import (
    ELASTICSEARCH_NAMES,
    NODE_CA_CERT,
    NODE_CERT,
    NODE_CERTS_DIR,
    NODE_KEY,
    OPENSEARCH_NAMES,
    JvmBackend,
    JvmEngine,
    jvm_node_settings,
    write_jvm_node_config,
)
from esdash.plugin.manager import PluginSet, load_plugins
from esdash.plugin.planning import (
    REASON_KINDS,
    CorpusStatus,
    PlannedTask,
    Refusal,
    adaptation_note,
    mapping_refusal,
    operation_refusal,
    plan_of_steps,
    query_refusal,
)
from esdash.plugin.secure_files import (
    SecurityFilesError,
    make_private_dir,
    owner_ids,
    write_private,
)
from esdash.plugin.security import Credentials, NodeSecurity, TlsFiles
from esdash.plugin.session import (
    BenchmarkSpec,
    ClusterSpec,
    PluginChoice,
    Session,
    SlurmSpec,
)
from esdash.plugin.spec import Register, hookimpl
from esdash.plugin.steps import load_steps, parse_steps
from esdash.plugin.values import (
    ALL_PAGES,
    REQUIRED,
    Corpus,
    Distribution,
    Endpoint,
    FieldSpec,
    NodeCommand,
    NodeDirs,
    NodeRequest,
    Option,
    OptionValue,
    OptionValues,
    Owner,
    Query,
    QueryStep,
    StepIndexing,
    TrackIndex,
)
from esdash.rundir.files import TOO_DEEP, read_regular
from esdash.rundir.records import (
    Health,
    JsonMapping,
    JsonObject,
    JsonValue,
    NodePlan,
    PlannedRequest,
    Topology,
)

__all__ = [
    "GeneratedTrack",
    "Generator",
    "REPLICAS",
    "SHARDS",
    "assumed_version",
    "NODE_CA_CERT",
    "NODE_CERT",
    "NODE_CERTS_DIR",
    "NODE_KEY",
    "distribution_check",
    "node_user_check",
    "unreadable_paths",
    "Unpacked",
    "engine_version",
    "is_jvm_distribution",
    "read_distribution",
    "unpack_integ_test_zip",
    "ELASTICSEARCH_NAMES",
    "JvmBackend",
    "JvmEngine",
    "OPENSEARCH_NAMES",
    "jvm_node_settings",
    "write_jvm_node_config",
    "ApiCall",
    "ClientApi",
    "EngineControl",
    "UNBOUNDED",
    "engine_reason",
    "Backend",
    "BadInput",
    "BenchmarkSpec",
    "BoundaryViolation",
    "BrokenPlugin",
    "CheckContext",
    "ClientCodec",
    "ClusterError",
    "ClusterSpec",
    "ControlClient",
    "ControlError",
    "Corpus",
    "Credentials",
    "Dir",
    "Distribution",
    "ELASTICSEARCH",
    "EncryptionMode",
    "Endpoint",
    "EngineInfo",
    "EsdashError",
    "FetchError",
    "FieldSpec",
    "Finding",
    "Health",
    "HostCheck",
    "HostProbe",
    "Interconnect",
    "InterconnectError",
    "JavaRuntime",
    "JavaVersion",
    "JsonMapping",
    "JsonObject",
    "JsonValue",
    "MavenMissing",
    "NodeCommand",
    "NodeDirs",
    "NodePlan",
    "NodeRequest",
    "NodeSecurity",
    "OPENSEARCH",
    "Option",
    "OptionValue",
    "OptionValues",
    "Owner",
    "PlannedTask",
    "PluginChoice",
    "CorpusStatus",
    "PluginInfo",
    "PluginSet",
    "PreflightCheck",
    "ALL_PAGES",
    "Query",
    "QueryNotSupported",
    "QueryStep",
    "StepIndexing",
    "REASON_KINDS",
    "REQUIRED",
    "TOO_DEEP",
    "PlannedRequest",
    "Refusal",
    "Register",
    "Registrable",
    "SecurityFilesError",
    "Session",
    "SlurmSpec",
    "TlsFiles",
    "Topology",
    "Track",
    "TrackIndex",
    "adaptation_note",
    "check_corpus",
    "default_distribution",
    "describe",
    "engine_of",
    "find_java",
    "find_maven",
    "generated_corpus",
    "group_name",
    "hookimpl",
    "install_into_cache",
    "interface_addresses",
    "java_check",
    "java_version",
    "keep_private",
    "reuse_privately",
    "last_line",
    "load_plugins",
    "load_steps",
    "make_dirs",
    "make_private_dir",
    "make_world_readable",
    "mapping_refusal",
    "maven_copy",
    "owner_ids",
    "parse_steps",
    "plan_of_steps",
    "point_jvm_files",
    "operation_refusal",
    "query_refusal",
    "read_regular",
    "run_as_user",
    "run_maven",
    "shorten",
    "unzip_keeping_modes",
    "user_name",
    "workspace",
    "write_atomically",
    "write_private",
]
