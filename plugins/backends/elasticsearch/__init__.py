"""The Elasticsearch backend: everything esdash knows about Elasticsearch lives here.

* :mod:`.distribution`: Maven coordinates, the default version, the flavors esdash supports
  and the Java each version needs; ``esdash fetch elasticsearch``;
* :mod:`.security`: x-pack security settings, the file realm and its password hashes;
* :mod:`.control`: the control client (``elasticsearch-py``), the way Rally drives a cluster;
* :mod:`.doctor`: what ``esdash doctor`` checks for Elasticsearch;
* :mod:`.backend`: the :class:`~esdash.plugin_api.Backend` tying them together.

The core of esdash speaks of a "search cluster" and asks this backend.
"""

from __future__ import annotations

from esdash.plugin_api import Backend, Register, hookimpl

from .backend import ElasticsearchBackend


@hookimpl
def esdash_register_backends(register: Register[Backend]) -> None:
    register(ElasticsearchBackend())
