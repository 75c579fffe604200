"""The MRI track: the paper's mock MRI metadata, its explicit mapping and its field schema.

The authors' generator has no mapping; with dynamic mapping ``KspaceFOVZ`` becomes ``long``
whenever the first document carries ``0`` and later floats are truncated.  This mapping is
strict and explicit.  The field schema carries the value ranges that client-side
order-preserving encryption needs.
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any

import esdash
from esdash.plugin_api import Corpus, FieldSpec, Option, Query, QueryStep, Track

INDEX = "mri"

#: Free text (analysed), exact-match strings, and strings queried both ways.
TEXT_FIELDS = ("ismrmrdHeader", "cflHeader", "StudyTimeText")
KEYWORD_FIELDS = (
    "DataFormat",
    "FrameOfReferenceUID",
    "MeasurementID",
    "StudyID",
    "SystemModel",
    "ProtocolName",
    "InstitutionName",
    "InstitutionAddress",
    "Trajectory",
    "AcquisitionType",
    "SequenceType",
    "BodyPart",
    "PatientID",
    "PatientName",
    "PatientSex",
    "TNumber",
    "Tags",
    "Filename",
)
TEXT_AND_KEYWORD_FIELDS = ("SystemVendor",)

#: Numeric fields with their inclusive value ranges and the precision the generator uses.
FLOAT_FIELDS: dict[str, tuple[float, float, float]] = {
    "SystemFieldStrength": (0.0, 10.0, 0.1),
    "AccelerationFactor": (0.0, 16.0, 0.0001),
    "TR": (0.0, 1.0, 0.0001),
    "TI": (0.0, 1.0, 0.0001),
    "TE": (0.0, 0.1, 0.0001),
    "FlipAngle": (0.0, 180.0, 0.0001),
    "EchoSpacing": (0.0, 0.1, 0.0001),
    "KspaceFOVX": (0.0, 1.0, 0.0001),
    "KspaceFOVY": (0.0, 1.0, 0.0001),
    "KspaceFOVZ": (0.0, 1.0, 0.0001),
    "ImageFOVX": (0.0, 1.0, 0.0001),
    "ImageFOVY": (0.0, 1.0, 0.0001),
    "ImageFOVZ": (0.0, 1.0, 0.0001),
    "SliceThickness": (0.0, 4.0, 0.0001),
    "PatientWeight": (0.0, 300.0, 0.0001),
    "Lamor_frequency": (0.0, 500.0, 0.0001),
}
INTEGER_FIELDS: dict[str, tuple[int, int]] = {
    "NumberReceiverChannels": (0, 256),
    "KspaceX": (0, 4096),
    "KspaceReadout": (0, 4096),
    "KspacePhaseEnc1": (0, 4096),
    "KspacePhaseEnc2": (0, 4096),
    "KspaceCoils": (0, 256),
    **{
        name: (0, 1024)
        for name in (
            "KspaceMaps",
            "KspaceTE",
            "KspaceCoeff",
            "KspaceCoeff2",
            "KspaceIter",
            "KspaceCshift",
            "KspaceTime",
            "KspaceTime2",
            "KspaceLevel",
            "KspaceAvg",
            "KspaceSlice",
        )
    },
    "ImageMatrixX": (0, 4096),
    "ImageMatrixY": (0, 4096),
    "ImageMatrixZ": (0, 4096),
    "BaseResolution": (0, 100),
    "PatientAge": (0, 150),
    "BrainAge": (0, 200),
}
DATE_FIELDS: dict[str, tuple[str, str]] = {
    "PatientBirthday": ("1900-01-01", "2100-12-31"),
    "StudyDate": ("1990-01-01", "2100-12-31"),
}


def _field_specs() -> tuple[FieldSpec, ...]:
    specs: list[FieldSpec] = []
    specs += [FieldSpec(name, "text") for name in TEXT_FIELDS]
    specs += [FieldSpec(name, "keyword") for name in KEYWORD_FIELDS]
    specs += [FieldSpec(name, "text+keyword") for name in TEXT_AND_KEYWORD_FIELDS]
    specs += [FieldSpec(n, "float", lo, hi, step) for n, (lo, hi, step) in FLOAT_FIELDS.items()]
    specs += [FieldSpec(n, "integer", lo, hi, 1) for n, (lo, hi) in INTEGER_FIELDS.items()]
    specs += [FieldSpec(name, "date") for name in DATE_FIELDS]
    return tuple(specs)


def mapping() -> dict[str, Any]:
    """The explicit, strict mapping of the MRI index."""
    properties: dict[str, Any] = {}
    for name in TEXT_FIELDS:
        properties[name] = {"type": "text"}
    for name in KEYWORD_FIELDS:
        properties[name] = {"type": "keyword"}
    for name in TEXT_AND_KEYWORD_FIELDS:
        properties[name] = {"type": "text", "fields": {"keyword": {"type": "keyword"}}}
    for name in FLOAT_FIELDS:
        properties[name] = {"type": "double"}
    for name in INTEGER_FIELDS:
        properties[name] = {"type": "integer"}
    for name in DATE_FIELDS:
        properties[name] = {"type": "date", "format": "yyyy-MM-dd"}
    return {"dynamic": "strict", "properties": properties}


def _query(name: str, body: dict[str, Any], *requires: str) -> Query:
    return Query(name, body, requires=requires)


#: The paper's seven queries, one step each (slides and reference-impl section 3).
QUERIES = (
    _query("body_part", {"query": {"term": {"BodyPart": "Head"}}}),
    _query("vendor", {"query": {"match_phrase": {"SystemVendor": "Siemens"}}}),
    _query("age", {"query": {"range": {"PatientAge": {"gte": 50, "lte": 60}}}}),
    _query(
        "body_part_resolution",
        {
            "query": {
                "bool": {"must": [{"term": {"BodyPart": "Head"}}, {"term": {"BaseResolution": 1}}]}
            }
        },
    ),
    _query(
        "brain_age",
        {
            "query": {
                "script": {
                    "script": {
                        "source": "doc['BrainAge'].value > doc['PatientAge'].value + 5",
                        "lang": "painless",
                    }
                }
            }
        },
        "scripting",
    ),
    _query(
        "vendor_body_part",
        {
            "query": {
                "bool": {
                    "must": [{"term": {"BodyPart": "Knee"}}, {"match": {"SystemVendor": "Philips"}}]
                }
            }
        },
    ),
    _query(
        "age_weight",
        {
            "size": 0,
            "query": {
                "bool": {
                    "must": [
                        {"match": {"PatientSex": "F"}},
                        {"range": {"PatientAge": {"gte": 40, "lte": 70}}},
                    ]
                }
            },
            "aggs": {"weight": {"histogram": {"field": "PatientWeight", "interval": 5}}},
        },
    ),
)


class MriTrack(Track):
    name = "mri"
    description = "mock MRI metadata (63 fields) and the paper's seven queries"
    options = (
        Option("documents", "int", "number of generated documents", default=10000, minimum=1),
        Option("seed", "int", "seed of the document generator", default=42),
        Option("shards", "int", "primary shards of the index", default=3, minimum=1),
        Option("replicas", "int", "replicas per shard", default=0, minimum=0),
    )
    index = INDEX
    fields = _field_specs()

    def corpus(self, options: Mapping[str, Any], cache_dir: Path) -> Corpus:
        raise NotImplementedError("the MRI generator is being written")

    def query_steps(self, options: Mapping[str, Any]) -> tuple[QueryStep, ...]:
        return tuple(QueryStep(q.name, (q,)) for q in QUERIES)

    def index_body(self, options: Mapping[str, Any]) -> dict[str, Any]:
        return {
            "settings": {
                "number_of_shards": options.get("shards", 3),
                "number_of_replicas": options.get("replicas", 0),
            },
            "mappings": mapping(),
        }


@esdash.hookimpl
def esdash_register_tracks(register) -> None:
    register(MriTrack())
