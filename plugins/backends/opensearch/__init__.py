"""The OpenSearch backend: everything esdash knows about OpenSearch lives here.

* :mod:`.distribution`: the tarball and the assembled layouts, the modules, mappers and
  plugins a distribution has; ``esdash fetch opensearch`` assembles 3.4.0 from Maven Central;
* :mod:`.java`: the Java OpenSearch needs (3.x: 21 or newer) and where it is found;
* :mod:`.security`: the security plugin's settings and files from esdash's PKI;
* :mod:`.control`: the control client (``opensearch-py``);
* :mod:`.doctor`: what ``esdash doctor`` checks for OpenSearch;
* :mod:`.checks`: the launch-stage pre-flight check (Java, the security plugin);
* :mod:`.backend`: the :class:`~esdash.plugin_api.Backend` tying them together.

It is written against :mod:`esdash.plugin_api` alone, like any third-party backend.
"""

from __future__ import annotations

from esdash.plugin_api import Backend, PreflightCheck, Register, hookimpl

from .backend import OpenSearchBackend
from .checks import OpenSearchLaunch


@hookimpl
def esdash_register_backends(register: Register[Backend]) -> None:
    register(OpenSearchBackend())


@hookimpl
def esdash_register_checks(register: Register[PreflightCheck]) -> None:
    register(OpenSearchLaunch())
