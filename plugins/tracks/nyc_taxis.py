"""The NYC taxis track: the authors' mapping and 18 query steps, a synthetic or the real corpus.

The mapping (``nyc_taxis_mapping.json``) and the steps (``nyc_taxis_queries.json``) are the
authors' ``benchmarker/data/nyc_taxis/index.json`` and ``query.json``, byte for byte in their
values; the query file only adds stable ``name`` keys (which the authors' tool ignores).  The
steps set no warm-up or duration of their own, so the session's apply (the authors ran 60 s
and 300 s); steps 9-14 carry the authors' think times (``sleep_between_requests_secs``).

The corpus is either Rally's real ``documents.json`` (option ``documents_file``; 165,346,692
trips of 2015, about 75 GB, fetched with Rally's download script) used as it is, or a seeded
synthetic one with the 18 fields the real documents carry and plausible distributions: 2015
pickups weighted by hour of day, log-normal trip distances, metered fares, NYC surcharges and
tolls, tips on card payments only, and pickup/dropoff points in New York.  Like the real data
it never sets ``cab_color``, ``ehail_fee``, ``surcharge`` or ``vendor_name``.
"""

from __future__ import annotations

import json
import math
import random
from collections.abc import Iterator
from datetime import datetime, timedelta
from pathlib import Path
from typing import TypeVar

from esdash.plugin_api import (
    REPLICAS,
    SHARDS,
    Corpus,
    CorpusStatus,
    FieldSpec,
    GeneratedTrack,
    JsonObject,
    Option,
    OptionValues,
    QueryStep,
    Register,
    Track,
    hookimpl,
    load_steps,
)

INDEX = "nyc_taxis"
HERE = Path(__file__).resolve().parent
MAPPING_FILE = HERE / "nyc_taxis_mapping.json"
QUERIES_FILE = HERE / "nyc_taxis_queries.json"
DATE_FORMAT = "%Y-%m-%d %H:%M:%S"

# ------------------------------------------------------------------- schema and mapping


def mapping() -> JsonObject:
    """The authors' properties under ``dynamic: strict`` (as their ingestor sent them)."""
    properties = json.loads(MAPPING_FILE.read_text(encoding="utf-8"))["properties"]
    return {"dynamic": "strict", "properties": properties}


#: Field schema with the generator's ranges (the real data has outliers beyond them).
FIELDS = (
    FieldSpec("pickup_datetime", "date"),
    FieldSpec("dropoff_datetime", "date"),
    FieldSpec("passenger_count", "integer", 0, 9, 1),
    FieldSpec("trip_distance", "float", 0.0, 200.0, 0.01),
    FieldSpec("fare_amount", "float", 0.0, 1000.0, 0.01),
    FieldSpec("extra", "float", 0.0, 1.0, 0.01),
    FieldSpec("mta_tax", "float", 0.0, 0.5, 0.01),
    FieldSpec("tip_amount", "float", 0.0, 500.0, 0.01),
    FieldSpec("tolls_amount", "float", 0.0, 50.0, 0.01),
    FieldSpec("improvement_surcharge", "float", 0.0, 0.3, 0.01),
    FieldSpec("total_amount", "float", 0.0, 1000.0, 0.01),
    FieldSpec("ehail_fee", "float", 0.0, 100.0, 0.01),
    FieldSpec("surcharge", "float", 0.0, 100.0, 0.01),
    FieldSpec("trip_type", "keyword"),
    FieldSpec("rate_code_id", "keyword"),
    FieldSpec("payment_type", "keyword"),
    FieldSpec("vendor_id", "keyword"),
    FieldSpec("store_and_fwd_flag", "keyword"),
    FieldSpec("cab_color", "keyword"),
    FieldSpec("vendor_name", "text"),
    FieldSpec("pickup_location", "geo_point"),
    FieldSpec("dropoff_location", "geo_point"),
)

# -------------------------------------------------------------------------- generator

YEAR_START = datetime(2015, 1, 1)
YEAR_DAYS = 365
#: Relative trips per hour of day (NYC taxi demand: a night low, an evening peak).
HOUR_WEIGHTS = (
    6, 4.5, 3.5, 2.5, 2, 2, 3.5, 5.5, 6.5, 6.5, 6, 6,
    6.5, 6.5, 7, 6.5, 6, 7, 8.5, 9, 8.5, 8, 8, 7,
)  # fmt: skip
#: (rate code, weight): standard, JFK flat fare, Newark, Nassau/Westchester, negotiated.
RATE_CODES = (("1", 97.5), ("2", 1.5), ("3", 0.2), ("4", 0.1), ("5", 0.7))
#: (payment type, weight): credit card, cash, no charge, dispute.
PAYMENT_TYPES = (("1", 60.0), ("2", 38.5), ("3", 1.0), ("4", 0.5))
PASSENGERS = ((1, 70.0), (2, 14.0), (3, 4.0), (4, 2.0), (5, 6.0), (6, 4.0))
VENDORS = (("1", 45.0), ("2", 55.0))
TRIP_TYPES = (("1", 98.6), ("2", 1.4))
#: Log-normal trip distance (miles): median e^0.82 = 2.27 mi, as in the authors' sample.
DISTANCE_MU, DISTANCE_SIGMA, DISTANCE_MAX = 0.82, 0.95, 150.0
#: Metered fare (2015): $2.50 flag drop, $2.50 per mile, about $0.25 per minute in traffic.
FLAG_DROP, PER_MILE, PER_MINUTE = 2.5, 2.5, 0.25
JFK_FLAT_FARE = 52.0
#: Toll amounts of the bridges and tunnels (2015).
TOLLS = (5.33, 5.33, 5.33, 2.44, 8.0, 10.5)
#: Where trips start: (weight, longitude, latitude, sd of longitude, sd of latitude).
AREAS = (
    (75.0, -73.980, 40.755, 0.020, 0.030),  # Manhattan
    (17.0, -73.930, 40.700, 0.060, 0.060),  # Brooklyn and Queens
    (5.0, -73.870, 40.774, 0.004, 0.003),  # LaGuardia
    (3.0, -73.785, 40.645, 0.006, 0.004),  # JFK
)
JFK = (-73.785, 40.645)
#: Longitude and latitude bounds the points are clipped to.
BOUNDS = (-74.30, -73.60, 40.45, 41.00)
MILES_PER_DEGREE_LAT = 69.0
MILES_PER_DEGREE_LON = 69.0 * math.cos(math.radians(40.75))


T = TypeVar("T")


def _weighted(rng: random.Random, table: tuple[tuple[T, float], ...]) -> T:
    return rng.choices([value for value, _ in table], [weight for _, weight in table])[0]


def _money(value: float) -> float:
    return round(value + 1e-9, 2)


def _clip(lon: float, lat: float) -> list[float]:
    lon = min(max(lon, BOUNDS[0]), BOUNDS[1])
    lat = min(max(lat, BOUNDS[2]), BOUNDS[3])
    return [round(lon, 6), round(lat, 6)]


def _pickup_point(rng: random.Random) -> tuple[float, float]:
    area = rng.choices(AREAS, [a[0] for a in AREAS])[0]
    return rng.gauss(area[1], area[3]), rng.gauss(area[2], area[4])


def _dropoff_point(rng: random.Random, lon: float, lat: float, miles: float) -> tuple[float, float]:
    """A point about ``miles`` of road away: the straight line is ~3/4 of the route."""
    bearing = rng.uniform(0, 2 * math.pi)
    straight = miles * rng.uniform(0.6, 0.9)
    return (
        lon + straight * math.sin(bearing) / MILES_PER_DEGREE_LON,
        lat + straight * math.cos(bearing) / MILES_PER_DEGREE_LAT,
    )


def _extra(pickup: datetime) -> float:
    """$0.50 overnight (20-6 h), $1 in the weekday rush hour (16-20 h), else nothing."""
    if pickup.hour >= 20 or pickup.hour < 6:
        return 0.5
    if 16 <= pickup.hour < 20 and pickup.weekday() < 5:
        return 1.0
    return 0.0


def trip(rng: random.Random) -> JsonObject:
    """One synthetic trip with the 18 fields of the real documents, in their order."""
    day = rng.randrange(YEAR_DAYS)
    hour = rng.choices(range(24), HOUR_WEIGHTS)[0]
    pickup = YEAR_START + timedelta(days=day, hours=hour, seconds=rng.randrange(3600))
    rate = _weighted(rng, RATE_CODES)
    lon, lat = _pickup_point(rng)
    if rate == "2":  # JFK flat fare: Manhattan to or from the airport
        distance = round(rng.uniform(15.0, 21.0), 2)
        end = JFK
    else:
        distance = 0.0 if rng.random() < 0.01 else rng.lognormvariate(DISTANCE_MU, DISTANCE_SIGMA)
        distance = round(min(distance, DISTANCE_MAX), 2)
        end = _dropoff_point(rng, lon, lat, distance)
    mph = min(max(rng.lognormvariate(math.log(12.0), 0.3), 3.0), 45.0)
    seconds = max(1, round(distance / mph * 3600 + rng.uniform(30, 240)))
    minutes = seconds / 60
    if rate == "2":
        fare = JFK_FLAT_FARE
    elif rate == "5":
        fare = float(rng.randrange(10, 160, 5))
    else:
        metered = FLAG_DROP + PER_MILE * distance + PER_MINUTE * minutes * rng.uniform(0.3, 1.0)
        fare = math.floor(metered * 2) / 2  # the meter counts in 50-cent steps
        if rate in ("3", "4"):
            fare *= 2
    extra = _extra(pickup)
    mta_tax = 0.5 if rng.random() < 0.985 else 0.0
    improvement = 0.3 if rng.random() < 0.9 else 0.0
    tolls = rng.choice(TOLLS) if rate in ("2", "3", "4") or rng.random() < 0.015 else 0.0
    payment = _weighted(rng, PAYMENT_TYPES)
    tip = 0.0
    if payment == "1" and rng.random() < 0.88:
        tip = _money(
            (fare + extra) * rng.choice((0.15, 0.2, 0.2, 0.25, 0.3, rng.uniform(0.05, 0.3)))
        )
    total = _money(fare + extra + mta_tax + tip + tolls + improvement)
    return {
        "total_amount": total,
        "improvement_surcharge": improvement,
        "pickup_location": _clip(lon, lat),
        "pickup_datetime": pickup.strftime(DATE_FORMAT),
        "trip_type": _weighted(rng, TRIP_TYPES),
        "dropoff_datetime": (pickup + timedelta(seconds=seconds)).strftime(DATE_FORMAT),
        "rate_code_id": rate,
        "tolls_amount": tolls,
        "dropoff_location": _clip(*end),
        "passenger_count": _weighted(rng, PASSENGERS),
        "fare_amount": fare,
        "extra": extra,
        "trip_distance": distance,
        "tip_amount": tip,
        "store_and_fwd_flag": "Y" if rng.random() < 0.005 else "N",
        "payment_type": payment,
        "mta_tax": mta_tax,
        "vendor_id": _weighted(rng, VENDORS),
    }


def generate(documents: int, seed: int) -> Iterator[JsonObject]:
    """``documents`` trips from ``random.Random(seed)``; a prefix for fewer documents."""
    rng = random.Random(seed)
    for _ in range(documents):
        yield trip(rng)


# ------------------------------------------------------------------------------ track


class NycTaxisTrack(GeneratedTrack):
    name = "nyc_taxis"
    description = "NYC taxi trips (Rally's nyc_taxis): the authors' mapping and 18 query steps"
    options = (
        Option("documents", "int", "number of generated trips", default=100_000, minimum=1),
        Option("seed", "int", "seed of the trip generator", default=42),
        Option(
            "documents_file",
            "path",
            "Rally's nyc_taxis documents.json to ingest instead of generated trips",
        ),
        SHARDS,
        REPLICAS,
    )
    index = INDEX
    fields = FIELDS

    def mapping(self) -> JsonObject:
        return mapping()

    def corpus(self, options: OptionValues, cache_dir: Path) -> Corpus:
        """The real ``documents_file`` as it is, else ``nyc_taxis-<documents>-<seed>.ndjson``."""
        values = self.resolved(options)
        if values["documents_file"] is not None:
            return Corpus(Path(values["documents_file"]))
        return self.cached_corpus(options, cache_dir, generate)

    def corpus_check(self, options: OptionValues, cache_dir: Path) -> CorpusStatus | None:
        """``documents_file`` is read as it is, so the ``corpus`` check may read it whole;
        a generated corpus is esdash's own (None: nothing to check before it is written)."""
        file = self.resolved(options)["documents_file"]
        if file is None:
            return None
        if not Path(file).is_file():
            return CorpusStatus(
                problems=(("track.documents_file", f"{file} does not exist or is no file"),)
            )
        return CorpusStatus(lines=(f"corpus: {file}",), files=((Path(file), False),))

    def query_steps(self, options: OptionValues) -> tuple[QueryStep, ...]:
        """The authors' 18 steps, in their order."""
        return load_steps(QUERIES_FILE)


@hookimpl
def esdash_register_tracks(register: Register[Track]) -> None:
    register(NycTaxisTrack())
