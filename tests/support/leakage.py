"""A leakage report as the ABE plugin returns it, for the record, report and dashboard tests.

The numbers are made up but shaped like the MRI track's: a dense OPE field recovered by
sorting, a two-value deterministic field that frequency analysis misses while the majority
guess gets half of it, a three-value field recovered by length alone, a high-entropy AES-SIV
text field nothing recovers.  Each field has its length classes and its majority guess
(:data:`REPORT`); :func:`before_lengths` is the same report as files written before those
were measured hold it.
"""

from __future__ import annotations

import copy
from typing import Any

THREAT_MODEL = (
    "An honest-but-curious cluster operator sees every stored ciphertext and every query, "
    "and knows a distribution similar to the data's; the key never leaves the client."
)
REFERENCES = [
    "Naveed, Kamara, Wright: Inference Attacks on Property-Preserving Encrypted Databases, "
    "CCS 2015",
    "Boldyreva, Chenette, O'Neill: Order-Preserving Encryption Revisited, CRYPTO 2011",
]

REPORT: dict[str, Any] = {
    "version": 1,
    "threat_model": THREAT_MODEL,
    "references": REFERENCES,
    "documents": 2000,
    "source": "generated sample of track mri (seed 42)",
    "auxiliary": "a second sample of the track's generator (seed 43)",
    "key_mode": "per-field",
    "names": {
        "scheme": "keyed PRF (HMAC-SHA256, 64 bits)",
        "declared": 23,
        "learns": "equality of names; not their length",
        "length_classes": 1,
    },
    "fields": [
        {
            "field": "PatientAge",
            "type": "integer",
            "scheme": "OPE",
            "learns": "order",
            "records": 2000,
            "distinct": 101,
            "length_classes": 2,
            "domain": 101,
            "attacks": [
                {
                    "name": "sorting",
                    "applicable": True,
                    "exact": 1.0,
                    "within_1pct": 1.0,
                    "note": "",
                },
                {
                    "name": "cumulative",
                    "applicable": True,
                    "exact": 0.62,
                    "within_1pct": 0.97,
                    "note": "",
                },
                {
                    "name": "length",
                    "applicable": False,
                    "exact": None,
                    "within_1pct": None,
                    "note": "not an attack of its own: the stored number is visible",
                },
            ],
            "baseline": {
                "name": "majority guess",
                "applicable": True,
                "exact": 0.018,
                "within_1pct": 0.036,
                "note": "",
            },
            "verdict": "PatientAge: dense domain of 101 values, 100 % of records recovered "
            "by sorting",
        },
        {
            "field": "PatientSex",
            "type": "keyword",
            "scheme": "AES-SIV",
            "learns": "equality, length",
            "records": 2000,
            "distinct": 2,
            "length_classes": 1,
            "domain": None,
            "attacks": [
                {
                    "name": "frequency",
                    "applicable": True,
                    "exact": 0.0,
                    "within_1pct": None,
                    "note": "",
                },
                {
                    "name": "length",
                    "applicable": True,
                    "exact": 0.495,
                    "within_1pct": None,
                    "note": "",
                },
            ],
            "baseline": {
                "name": "majority guess",
                "applicable": True,
                "exact": 0.505,
                "within_1pct": None,
                "note": "",
            },
            "verdict": "PatientSex: 2 values of about equal frequency, half recovered by guessing",
        },
        {
            "field": "SequenceType",
            "type": "keyword",
            "scheme": "AES-SIV",
            "learns": "equality, length",
            "records": 2000,
            "distinct": 3,
            "length_classes": 3,
            "domain": None,
            "attacks": [
                {
                    "name": "frequency",
                    "applicable": True,
                    "exact": 0.0,
                    "within_1pct": None,
                    "note": "",
                },
                {
                    "name": "length",
                    "applicable": True,
                    "exact": 1.0,
                    "within_1pct": None,
                    "note": "",
                },
            ],
            "baseline": {
                "name": "majority guess",
                "applicable": True,
                "exact": 0.365,
                "within_1pct": None,
                "note": "",
            },
            "verdict": "SequenceType: 3 values of 3 lengths, all recovered by length",
        },
        {
            "field": "ismrmrdHeader",
            "type": "text",
            "scheme": "AES-SIV",
            "learns": "equality, length",
            "records": 2000,
            "distinct": 2000,
            "length_classes": 93,
            "domain": None,
            "attacks": [
                {
                    "name": "frequency",
                    "applicable": True,
                    "exact": 0.0005,
                    "within_1pct": None,
                    "note": "",
                },
                {
                    "name": "sorting",
                    "applicable": False,
                    "exact": None,
                    "within_1pct": None,
                    "note": "not order-preserving",
                },
            ],
            "baseline": {
                "name": "majority guess",
                "applicable": True,
                "exact": 0.0005,
                "within_1pct": None,
                "note": "",
            },
            "verdict": "ismrmrdHeader: every value distinct, nearly nothing recovered",
        },
    ],
}


def report() -> dict[str, Any]:
    """A fresh copy of :data:`REPORT` (tests may change it)."""
    return copy.deepcopy(REPORT)


def before_lengths() -> dict[str, Any]:
    """:func:`report` as a file written before lengths and the baseline were measured."""
    data = report()
    del data["names"]["length_classes"]
    for item in data["fields"]:
        del item["length_classes"], item["baseline"]
        item["attacks"] = [a for a in item["attacks"] if not a["name"].startswith("length")]
    return data
