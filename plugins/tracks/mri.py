"""The MRI track: the paper's mock MRI metadata, its mapping, generator and seven queries.

The document model is the authors' ``mrirally/generate_json.py`` (63 flat fields, modelled
with radiologists), re-implemented as a seeded generator: the same seed and document count
give the same corpus, byte for byte, and a smaller count gives a prefix of a larger one.
Their generator's bugs are fixed (see :func:`generate`):

- ``InstitutionAddress`` is the institution's full address, not one random character of it;
- ``BaseResolution`` is the in-plane pixel size in mm (FOV in mm / matrix), not always 0;
- ``ImageMatrixY`` follows the first phase encoding (``KspacePhaseEnc1``), the in-plane
  direction; the authors used ``KspacePhaseEnc2`` (the through-plane direction, 1 for 2D scans,
  which made half of all images 1 pixel high; their own ``SliceThickness`` treats Enc2 as
  the slab direction);
- ``Filename`` has the dot before its extension (``2014-07-28_66283336980.h5``);
- ``SliceThickness`` is rounded to 4 decimals like every other float (no ``0.0030000000000000005``);
- ``KspaceFOVZ``/``ImageFOVZ`` are always JSON floats (``0.0`` for 2D, never the int ``0``);
  FOVs are clipped to 5-70 cm (the normal tails went negative);
- ``PatientBirthday`` agrees with ``PatientAge`` at ``StudyDate``;
- the generator is seeded (``random.Random(seed)`` only) and its count and file are options.

The mapping is strict and explicit (the authors had none: dynamic mapping made
``KspaceFOVZ`` a ``long`` whenever the first document carried ``0``).  The field schema
carries the value ranges that client-side order-preserving encryption needs.
"""

from __future__ import annotations

import random
import string
from collections.abc import Iterator
from datetime import date, timedelta
from pathlib import Path

from esdash.plugin_api import (
    REPLICAS,
    SHARDS,
    Corpus,
    FieldSpec,
    GeneratedTrack,
    JsonObject,
    Option,
    OptionValues,
    Query,
    QueryStep,
    Register,
    Track,
    hookimpl,
)

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
    # mm per pixel: FOV (50-700 mm) / ImageMatrixX (13-512).
    "BaseResolution": (0.0, 60.0, 0.0001),
}
#: The constant k-space fields.
CONSTANT_ONE = (
    "KspaceMaps",
    "KspaceTE",
    "KspaceCoeff",
    "KspaceCoeff2",
    "KspaceIter",
    "KspaceCshift",
    "KspaceTime",
    "KspaceTime2",
    "KspaceLevel",
)
INTEGER_FIELDS: dict[str, tuple[int, int]] = {
    "NumberReceiverChannels": (0, 256),
    "KspaceX": (0, 4096),
    "KspaceReadout": (0, 4096),
    "KspacePhaseEnc1": (0, 4096),
    "KspacePhaseEnc2": (0, 4096),
    "KspaceCoils": (0, 256),
    **{name: (0, 1024) for name in (*CONSTANT_ONE, "KspaceAvg", "KspaceSlice")},
    "ImageMatrixX": (0, 4096),
    "ImageMatrixY": (0, 4096),
    "ImageMatrixZ": (0, 4096),
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


def mapping() -> JsonObject:
    """The explicit, strict mapping of the MRI index."""
    properties: JsonObject = {}
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


# -------------------------------------------------------------------------- generator

#: Decimals of every generated float (the authors' ``ROUND_TO``).
ROUND_TO = 4
_ALPHABET = string.ascii_letters + string.digits + " "
VENDORS = ("GE", "Siemens", "Philips", "Canon", "Hitachi", "Bruker")
#: The system model of each vendor, in the order of :data:`VENDORS`.
MODELS = ("SIGNA", "MAGNETOM", "Achieva", "Vantage", "Oasis", "BioSpec")
#: (name, address) of the institutions.
INSTITUTIONS = (
    ("Charité - Universitätsmedizin Berlin", "Charitéplatz 1, 10117 Berlin, Germany"),
    (
        "Heidelberg University Hospital",
        "Im Neuenheimer Feld 400, 69120 Heidelberg, Germany",
    ),
    ("University Hospital Cologne", "Kerpener Str. 62, 50937 Köln, Germany"),
    ("LMU Klinikum Munich", "Marchioninistraße 15, 81377 München, Germany"),
    (
        "University Hospital Frankfurt",
        "Theodor-Stern-Kai 7, 60590 Frankfurt am Main, Germany",
    ),
    ("UMG - Universitätsmedizin Göttingen", "Robert-Koch-Str. 40, 37075 Göttingen, Germany"),
    ("University Hospital Hamburg-Eppendorf", "Martinistraße 52, 20246 Hamburg, Germany"),
    ("University Hospital Tübingen", "Geissweg 3, 72076 Tübingen, Germany"),
    ("University Hospital Essen", "Hufelandstraße 55, 45147 Essen, Germany"),
    ("University Hospital Bonn", "Sigmund-Freud-Straße 25, 53127 Bonn, Germany"),
)
DATA_FORMATS = ("h5", "dat", "nii", "nii.gz", "dicom")
FIELD_STRENGTHS = (1.5, 3.0, 7.0)
RECEIVER_CHANNELS = (8, 12, 16, 32, 64)
#: Repetition, inversion and echo times in seconds.
TR_VALUES = tuple(
    ms / 1000 for ms in (5, 10, 20, 30, 40, 50, 60, 70, 80, 90, 100, 200, 300, 400, 500, 600)
)
TI_VALUES = tuple(ms / 1000 for ms in range(200, 700, 100))
TE_VALUES = tuple(ms / 1000 for ms in range(1, 10))
POWERS = (64, 128, 256, 512)
#: Phase encodings: a power of two or 13, 38, ..., 488.
PHASE_ENCODINGS = (*POWERS, *range(13, 500, 25))
#: The second phase encoding is 1 (2D) about half of the time.
PHASE_ENCODINGS_2 = (*(1,) * 25, *PHASE_ENCODINGS)
SLICES = (*(1,) * 25, *range(80, 200, 5))
#: Slice thicknesses in metres (0.8-6 mm).
SLICE_THICKNESSES = tuple(mm / 1000 for mm in (1, 0.8, 1.2, 1.5, 2, 3, 4, 5, 6))
BODY_PARTS = ("Heart", "Knee", "Head")
SURNAMES = (
    "Müller",
    "Schmidt",
    "Schneider",
    "Fischer",
    "Weber",
    "Meyer",
    "Wagner",
    "Becker",
    "Schulz",
    "Hoffmann",
)
TAGS = tuple(f"Tag{i}" for i in range(1, 11))
STUDY_FIRST = date(2010, 1, 1)
STUDY_LAST = date(2020, 1, 1)
#: Field of view (metres): half "head" N(25 cm, 5 cm), half "chest" N(40 cm, 5 cm), clipped.
FOV_MEANS = (0.25, 0.40)
FOV_SD = 0.05
FOV_RANGE = (0.05, 0.70)
#: Brain age = age + N(0, 5 years), rounded, at least 1 (the slides' "variance of 5 years").
BRAIN_AGE_SD = 5.0


def _text(rng: random.Random, shortest: int, longest: int) -> str:
    return "".join(rng.choices(_ALPHABET, k=rng.randint(shortest, longest)))


def _fov(rng: random.Random) -> float:
    value = rng.gauss(rng.choice(FOV_MEANS), FOV_SD)
    return round(min(max(value, FOV_RANGE[0]), FOV_RANGE[1]), ROUND_TO)


def _years_before(day: date, years: int) -> date:
    try:
        return day.replace(year=day.year - years)
    except ValueError:  # 29 February in a year without one
        return day.replace(year=day.year - years, day=28)


def _birthday(rng: random.Random, study: date, age: int) -> date:
    """A birthday at which the patient is ``age`` years old on ``study``."""
    latest = _years_before(study, age)
    earliest = _years_before(study, age + 1) + timedelta(days=1)
    return earliest + timedelta(days=rng.randint(0, (latest - earliest).days))


def age_on(birthday: date, day: date) -> int:
    """Completed years between ``birthday`` and ``day``."""
    return day.year - birthday.year - ((day.month, day.day) < (birthday.month, birthday.day))


def document(rng: random.Random) -> JsonObject:
    """One MRI metadata document, the fields in the authors' order."""
    doc: JsonObject = {}
    doc["ismrmrdHeader"] = _text(rng, 8, 100)
    doc["cflHeader"] = _text(rng, 8, 100)
    doc["DataFormat"] = rng.choice(DATA_FORMATS)
    doc["FrameOfReferenceUID"] = "".join(rng.choices(_ALPHABET, k=36))
    doc["MeasurementID"] = str(rng.randint(10_000_000_000, 99_999_999_999))
    doc["StudyID"] = str(rng.randint(10000, 99999))
    doc["StudyTimeText"] = _text(rng, 8, 20)
    vendor = rng.randrange(len(VENDORS))
    doc["SystemVendor"] = VENDORS[vendor]
    doc["SystemModel"] = MODELS[vendor]
    doc["ProtocolName"] = f"{VENDORS[vendor]}{rng.randint(1, 3)}"
    doc["SystemFieldStrength"] = rng.choice(FIELD_STRENGTHS)
    doc["NumberReceiverChannels"] = rng.choice(RECEIVER_CHANNELS)
    institution, address = rng.choice(INSTITUTIONS)
    doc["InstitutionName"] = institution
    doc["InstitutionAddress"] = address
    doc["Trajectory"] = rng.choice(("Cartesian", "Radial", "Spiral"))
    doc["AcquisitionType"] = rng.choice(("3D", "2D"))
    doc["AccelerationFactor"] = rng.choice((1.0, 2.0, 4.0, 8.0))
    doc["TR"] = rng.choice(TR_VALUES)
    doc["TI"] = rng.choice(TI_VALUES)
    doc["TE"] = rng.choice(TE_VALUES)
    doc["FlipAngle"] = round(rng.uniform(3, 90), ROUND_TO)
    doc["SequenceType"] = rng.choice(("GradientEcho", "SpinEcho", "InversionRecovery"))
    doc["EchoSpacing"] = rng.choice(TE_VALUES)
    doc["KspaceX"] = rng.choice(POWERS)
    doc["KspaceFOVX"] = _fov(rng)
    doc["KspaceFOVY"] = _fov(rng)
    doc["KspaceFOVZ"] = 0.0 if rng.random() < 0.5 else _fov(rng)
    doc["KspaceReadout"] = rng.choice(POWERS)
    doc["KspacePhaseEnc1"] = rng.choice(PHASE_ENCODINGS)
    doc["KspacePhaseEnc2"] = rng.choice(PHASE_ENCODINGS_2)
    doc["KspaceCoils"] = doc["NumberReceiverChannels"]
    for name in CONSTANT_ONE:
        doc[name] = 1
    doc["KspaceSlice"] = rng.choice(SLICES)
    doc["KspaceAvg"] = 1
    doc["ImageFOVX"] = doc["KspaceFOVX"]
    doc["ImageFOVY"] = doc["KspaceFOVY"]
    doc["ImageFOVZ"] = doc["KspaceFOVZ"]
    readout = doc["KspaceReadout"]
    doc["ImageMatrixX"] = rng.choice(
        (readout, readout // 2, doc["KspacePhaseEnc1"], doc["KspaceX"])
    )
    doc["BaseResolution"] = round(doc["ImageFOVX"] * 1000 / doc["ImageMatrixX"], ROUND_TO)
    doc["ImageMatrixY"] = doc["KspacePhaseEnc1"]
    doc["ImageMatrixZ"] = rng.randint(1, 100)
    thickness = rng.choice(SLICE_THICKNESSES)
    if rng.random() < 0.5:  # a 3D slab: the thickness times the second phase encoding
        thickness *= doc["KspacePhaseEnc2"]
    doc["SliceThickness"] = round(thickness, ROUND_TO)
    doc["BodyPart"] = rng.choice(BODY_PARTS)
    doc["PatientID"] = str(rng.randint(1_000_000_000, 1_000_002_000))
    doc["PatientName"] = rng.choice(SURNAMES)
    # Drawn in this order so that the birthday can agree with age and study date.
    weight = round(rng.uniform(50, 150), ROUND_TO)
    sex = rng.choice(("M", "F"))
    age = rng.randint(6, 100)
    study = STUDY_FIRST + timedelta(days=rng.randint(0, (STUDY_LAST - STUDY_FIRST).days))
    doc["PatientBirthday"] = _birthday(rng, study, age).isoformat()
    doc["PatientWeight"] = weight
    doc["PatientSex"] = sex
    doc["PatientAge"] = age
    doc["StudyDate"] = study.isoformat()
    doc["Lamor_frequency"] = round(doc["SystemFieldStrength"] * 42, ROUND_TO)
    doc["TNumber"] = f"T{rng.randint(0, 100000)}"
    doc["Tags"] = rng.sample(TAGS, rng.randint(0, len(TAGS)))
    doc["Filename"] = f"{doc['StudyDate']}_{doc['MeasurementID']}.{doc['DataFormat']}"
    doc["BrainAge"] = max(1, age + round(rng.gauss(0, BRAIN_AGE_SD)))
    return doc


def generate(documents: int, seed: int) -> Iterator[JsonObject]:
    """``documents`` MRI documents from ``random.Random(seed)``; a prefix for fewer documents."""
    rng = random.Random(seed)
    for _ in range(documents):
        yield document(rng)


# ---------------------------------------------------------------------------- queries


def _query(name: str, body: JsonObject, *requires: str) -> Query:
    return Query(name, body, requires=requires)


#: The paper's seven queries (slides, "Custom MRI Benchmark: Queries"), in the order of its
#: tables.  Where the slides name values, these are they; elsewhere one value is chosen.
QUERIES = (
    # "return all MRI scans of the head": term.  ~1/3 of the documents.
    _query("body_part", {"query": {"term": {"BodyPart": "Head"}}}),
    # "all MRI scans from a specific system vendor": match_phrase.  ~1/6.
    _query("vendor", {"query": {"match_phrase": {"SystemVendor": "Siemens"}}}),
    # "patients with an age between 50 and 60 years": range.  11 of 95 ages, ~11.6 %.
    _query("age", {"query": {"range": {"PatientAge": {"gte": 50, "lte": 60}}}}),
    # "scans of the head with a resolution of 256 times 256": boolean-chained terms.  ~0.6 %.
    _query(
        "body_part_resolution",
        {
            "query": {
                "bool": {
                    "must": [
                        {"term": {"BodyPart": "Head"}},
                        {"term": {"ImageMatrixX": 256}},
                        {"term": {"ImageMatrixY": 256}},
                    ]
                }
            }
        },
    ),
    # "brain age larger than 5 years of patient age": script filter.  P(N(0,5) > 5.5) ~13.6 %.
    _query(
        "brain_age",
        {
            "query": {
                "bool": {
                    "filter": {
                        "script": {
                            "script": {
                                "source": "doc['BrainAge'].value > doc['PatientAge'].value + 5",
                                "lang": "painless",
                            }
                        }
                    }
                }
            }
        },
        "scripting",
    ),
    # "scans of heads done on either a Siemens or a General Electric scanner": term + match
    # (the slides' sequences, MP2RAGE and BRAVO, are not in the model).  1/3 * 2/6 ~11.1 %.
    _query(
        "vendor_body_part",
        {
            "query": {
                "bool": {
                    "must": [
                        {"term": {"BodyPart": "Head"}},
                        {"match": {"SystemVendor": "Siemens GE"}},
                    ]
                }
            }
        },
    ),
    # "all men with an age lower than 70, a histogram of the patient weight with a binning
    # size of 5": match + range + histogram.  1/2 * 64/95 ~33.7 % match, 20 buckets.
    _query(
        "age_weight",
        {
            "size": 0,
            "query": {
                "bool": {
                    "must": [
                        {"match": {"PatientSex": "M"}},
                        {"range": {"PatientAge": {"lt": 70}}},
                    ]
                }
            },
            "aggs": {"weight": {"histogram": {"field": "PatientWeight", "interval": 5}}},
        },
    ),
)


# ------------------------------------------------------------------------------ track


class MriTrack(GeneratedTrack):
    name = "mri"
    description = "mock MRI metadata (63 fields) and the paper's seven queries"
    options = (
        Option("documents", "int", "number of generated documents", default=10000, minimum=1),
        Option("seed", "int", "seed of the document generator", default=42),
        SHARDS,
        REPLICAS,
    )
    index = INDEX
    fields = _field_specs()

    def mapping(self) -> JsonObject:
        return mapping()

    def corpus(self, options: OptionValues, cache_dir: Path) -> Corpus:
        """``cache_dir/mri-<documents>-<seed>.ndjson``, generated once (atomically)."""
        return self.cached_corpus(options, cache_dir, generate)

    def query_steps(self, options: OptionValues) -> tuple[QueryStep, ...]:
        """One step per query, like the paper's tables; session warm-up and duration."""
        return tuple(QueryStep(query.name, (query,)) for query in QUERIES)


@hookimpl
def esdash_register_tracks(register: Register[Track]) -> None:
    register(MriTrack())
