"""The typed plugin contract and the formats plugins use.

* :mod:`~esdash.plugin.spec`: the hookspecs (typed ``register`` callables, observers);
* :mod:`~esdash.plugin.api`: the base classes plugins register;
* :mod:`~esdash.plugin.values`: the records those classes take and return (options,
  distributions, queries, steps, corpora), importing none of the modules that use them;
* :mod:`~esdash.plugin.session`: the validated session plugins are handed (``esdash.session``
  reads session files into it);
* :mod:`~esdash.plugin.control`: the control-client contract backends implement;
* :mod:`~esdash.plugin.checks`: pre-flight checks (one list for every way into a run);
* :mod:`~esdash.plugin.options`: validation of the session keys a plugin declares;
* :mod:`~esdash.plugin.manager`: loading plugins, the registries, calling observers;
* :mod:`~esdash.plugin.corpus`, :mod:`~esdash.plugin.steps`: the corpus and query-step
  formats tracks use;
* :mod:`~esdash.plugin.order`: the order a session's steps run in, round after round;
* :mod:`~esdash.plugin.corpus_slices`, :mod:`~esdash.plugin.corpus_scan` and
  :mod:`~esdash.plugin.index_stamp`: a corpus' slices and whole-file check and an index's
  fingerprint, which the preparation makes and the ranks read (so both import them here).

Plugins import none of these directly: :mod:`esdash.plugin_api` re-exports what they use.
"""
