"""A leakage report as the ABE plugin returns it, for the record, report and dashboard tests.

The numbers are made up but shaped like the MRI track's: a dense OPE field recovered by
sorting, a two-value deterministic field recovered by frequency analysis, a high-entropy
AES-SIV text field nothing recovers.
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
        "learns": "equality of names",
    },
    "fields": [
        {
            "field": "PatientAge",
            "type": "integer",
            "scheme": "OPE",
            "learns": "order",
            "records": 2000,
            "distinct": 101,
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
            ],
            "verdict": "PatientAge: dense domain of 101 values, 100 % of records recovered "
            "by sorting",
        },
        {
            "field": "PatientSex",
            "type": "keyword",
            "scheme": "AES-SIV",
            "learns": "equality",
            "records": 2000,
            "distinct": 2,
            "domain": None,
            "attacks": [
                {
                    "name": "frequency",
                    "applicable": True,
                    "exact": 1.0,
                    "within_1pct": None,
                    "note": "",
                }
            ],
            "verdict": "PatientSex: 2 values of unequal frequency, all recovered",
        },
        {
            "field": "ismrmrdHeader",
            "type": "text",
            "scheme": "AES-SIV",
            "learns": "equality",
            "records": 2000,
            "distinct": 2000,
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
            "verdict": "ismrmrdHeader: every value distinct, nearly nothing recovered",
        },
    ],
}


def report() -> dict[str, Any]:
    """A fresh copy of :data:`REPORT` (tests may change it)."""
    return copy.deepcopy(REPORT)
