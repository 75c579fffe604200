"""The typed plugin contract and the formats plugins use.

* :mod:`~esdash.plugin.spec`: the hookspecs (typed ``register`` callables, observers);
* :mod:`~esdash.plugin.api`: the base classes plugins register and their value types;
* :mod:`~esdash.plugin.control`: the control-client contract backends implement;
* :mod:`~esdash.plugin.checks`: pre-flight checks (one list for every way into a run);
* :mod:`~esdash.plugin.options`: validation of the session keys a plugin declares;
* :mod:`~esdash.plugin.manager`: loading plugins, the registries, calling observers;
* :mod:`~esdash.plugin.corpus`, :mod:`~esdash.plugin.steps`: the corpus and query-step
  formats tracks use.

Plugins import none of these directly: :mod:`esdash.plugin_api` re-exports what they use.
"""
