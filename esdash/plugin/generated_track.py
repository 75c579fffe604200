"""A track that generates its corpus and sizes its index from options: what MRI and nyc_taxis
share.

Such a track declares its options with defaults, reads them back with the defaults filled
in (:meth:`GeneratedTrack.resolved`: a session names only what it changes), and sends one
index body whose shards and replicas are options (:data:`SHARDS`, :data:`REPLICAS`) and
whose mapping is the track's own (:meth:`GeneratedTrack.mapping`).  The generated corpus
is cached as ``<name>-<documents>-<seed>.ndjson`` and carries its generator and seed as its
origin, which is how index reuse tells one generated corpus from another
(:meth:`GeneratedTrack.cached_corpus`).
"""

from __future__ import annotations

from abc import abstractmethod
from collections.abc import Callable, Iterable
from pathlib import Path

from esdash.plugin.api import Track
from esdash.plugin.corpus import generated_corpus
from esdash.plugin.values import Corpus, Option, OptionValues
from esdash.rundir.records import JsonObject

#: The options of the index's size every generated track declares.
SHARDS = Option("shards", "int", "primary shards of the index", default=3, minimum=1)
REPLICAS = Option("replicas", "int", "replicas per shard", default=0, minimum=0)

#: A corpus generator: ``(documents, seed) -> documents``, the same for the same arguments.
Generator = Callable[[int, int], Iterable[JsonObject]]


class GeneratedTrack(Track):
    """A :class:`~esdash.plugin.api.Track` with a generated corpus and :data:`SHARDS` and
    :data:`REPLICAS` among its options."""

    @abstractmethod
    def mapping(self) -> JsonObject:
        """The index's mapping."""

    def resolved(self, options: OptionValues) -> OptionValues:
        """``options`` with the declared defaults filled in for keys it lacks."""
        return {option.name: options.get(option.name, option.default) for option in self.options}

    def index_body(self, options: OptionValues) -> JsonObject:
        values = self.resolved(options)
        return {
            "settings": {
                "number_of_shards": values["shards"],
                "number_of_replicas": values["replicas"],
            },
            "mappings": self.mapping(),
        }

    def cached_corpus(self, options: OptionValues, cache_dir: Path, generate: Generator) -> Corpus:
        """``cache_dir/<name>-<documents>-<seed>.ndjson`` from ``generate(documents, seed)``,
        written once (atomically)."""
        values = self.resolved(options)
        count, seed = values["documents"], values["seed"]
        path = Path(cache_dir) / f"{self.name}-{count}-{seed}.ndjson"
        origin = {"generator": self.name, "seed": seed}  # identifies the index's corpus
        return generated_corpus(path, generate(count, seed), count, origin)
