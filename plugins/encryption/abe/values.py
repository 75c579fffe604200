"""Plaintext values as OPE integers (numbers, dates) and as AES-SIV strings (text, keywords).

OPE encrypts integers of a domain ``[0, top]``.  A *grid* maps a field's values onto it,
exactly and order-preservingly, and back:

- :class:`NumberGrid`: ``index(x) = (x - minimum) / step``, computed on the decimal text of
  ``x`` (``Decimal(str(x))``, scaled to integers), never in floating point: there
  ``0.3 / 0.1 == 2.9999999999999996`` and ``floor`` puts 0.2 and 0.3 on one point, which
  the slides' formula does for 11-32 % of the values (ope.md §4.5).  A value that is not on
  the grid or outside the range is an error, never silently rounded: the ciphertext must
  decrypt to the value that was ingested.
- :class:`DayGrid`: ``YYYY-MM-DD`` as the integer ``YYYYMMDD`` in ``[0, 30 000 000]``.
- :class:`SecondGrid`: date-times as ``YYYYMMDDhhmmss`` in ``[0, 3·10^13]``, in UTC.

The index order is the value order, so range bounds map to grid indices by ceiling and
floor (:meth:`ceil_index`, :meth:`floor_index`) and the encrypted range query selects
exactly the documents the plaintext one does.  Date bounds follow Elasticsearch's rules for
missing components: ``lte "2015-01-01"`` means up to the last millisecond of that day.

:class:`StringCipher` is deterministic AES-SIV with the field path as associated data:
equal values in one field have equal ciphertexts (term queries work), equal values in two
fields do not.
"""

from __future__ import annotations

import base64
import binascii
import math
import re
from datetime import date, datetime, timedelta, timezone
from decimal import Decimal, InvalidOperation, localcontext

from esdash.plugin_api import JsonValue

#: Domain of YYYYMMDD (the slides' "(0, 30000000)").
DAY_TOP = 30_000_000
#: Domain of YYYYMMDDhhmmss.
SECOND_TOP = 30_000_000 * 1_000_000
_EPOCH = datetime(1970, 1, 1, tzinfo=timezone.utc)
_DAY = re.compile(r"^(\d{4})-(\d{2})-(\d{2})\Z")
_SECOND = re.compile(
    r"^(\d{4})-(\d{2})-(\d{2})[T ](\d{2}):(\d{2}):(\d{2})(?:\.(\d+))?(Z|[+-]\d{2}:?\d{2})?\Z"
)
_DATE_MATH = re.compile(r"(^now)|(\|\|)")


#: A JSON scalar as a document or a query gives it: what a field's value caches are keyed by.
Scalar = str | int | float | bool


class OffGrid(ValueError):
    """A value the grid cannot represent exactly (wrong type, off the step, out of range)."""


def _decimal(value: JsonValue) -> Decimal:
    if isinstance(value, bool):
        raise OffGrid(f"{value!r} is a boolean, not a number")
    if isinstance(value, int):
        return Decimal(value)
    if isinstance(value, float):
        if not math.isfinite(value):
            raise OffGrid(f"{value!r} is not a finite number")
        return Decimal(repr(value))
    if isinstance(value, str):
        try:
            found = Decimal(value.strip())
        except InvalidOperation:
            raise OffGrid(f"{value!r} is not a number") from None
        if not found.is_finite():
            raise OffGrid(f"{value!r} is not a finite number")
        return found
    raise OffGrid(f"{value!r} is not a number")


def _places(value: Decimal) -> int:
    """Decimal places of ``value`` (0 for integers)."""
    exponent = value.normalize().as_tuple().exponent
    return max(0, -int(exponent))


class NumberGrid:
    """Numbers ``minimum + i * step`` for ``i`` in ``[0, top]``, exactly.

    All arithmetic is on integers scaled by ``10**places`` (``places`` = the decimals of
    ``minimum`` and ``step``); ``integral`` fields decode to ``int``, others to ``float``.
    """

    kind = "number"

    def __init__(
        self, minimum: JsonValue, maximum: JsonValue, step: JsonValue, integral: bool
    ) -> None:
        with localcontext() as ctx:
            ctx.prec = 80
            lo, hi, st = _decimal(minimum), _decimal(maximum), _decimal(step)
            if st <= 0:
                raise ValueError(f"step must be positive, not {step!r}")
            if hi < lo:
                raise ValueError(f"maximum {maximum!r} is below minimum {minimum!r}")
            self.places = max(_places(lo), _places(st))
            self.low = int(lo.scaleb(self.places))
            self.step = int(st.scaleb(self.places))
            self.top = (math.floor(hi.scaleb(self.places)) - self.low) // self.step
        self.integral = integral
        self.spec = (str(lo), str(hi), str(st))

    def _scaled(self, value: JsonValue) -> Decimal | int:
        if type(value) is int and not self.places:
            return value
        if type(value) is float:
            # Fast path, same result as Decimal(repr(value)).scaleb(places): the shortest
            # decimal text of the float, scaled by string surgery on integers.
            text = repr(value)
            if "e" not in text and "n" not in text:  # not 1e-05, inf or nan
                negative = text[0] == "-"
                whole, _, fraction = text.lstrip("-").partition(".")
                fraction = fraction.rstrip("0")
                if len(fraction) <= self.places:
                    scaled = int(whole + fraction.ljust(self.places, "0"))
                    return -scaled if negative else scaled
                return Decimal(text).scaleb(self.places)  # more decimals: not on the grid
        with localcontext() as ctx:
            ctx.prec = 80
            return _decimal(value).scaleb(self.places)

    def index(self, value: JsonValue) -> int:
        """The grid index of ``value``; :class:`OffGrid` unless it is exactly a grid point."""
        scaled = self._scaled(value)
        if isinstance(scaled, Decimal):
            if scaled != scaled.to_integral_value():
                raise OffGrid(f"{value!r} is not a multiple of the step {self.spec[2]}")
            scaled = int(scaled)
        index, rest = divmod(scaled - self.low, self.step)
        if rest:
            raise OffGrid(f"{value!r} is not on the grid {self.spec[0]} + k * {self.spec[2]}")
        if not 0 <= index <= self.top:
            raise OffGrid(
                f"{value!r} is outside the field's range [{self.spec[0]}, {self.spec[1]}]"
            )
        return index

    def ceil_index(self, value: JsonValue) -> int:
        """The smallest index whose value is >= ``value`` (may lie outside ``[0, top]``)."""
        with localcontext() as ctx:
            ctx.prec = 80
            offset = self._scaled(value) - self.low
            return math.ceil(Decimal(offset) / self.step)

    def floor_index(self, value: JsonValue) -> int:
        """The largest index whose value is <= ``value`` (may lie outside ``[0, top]``)."""
        with localcontext() as ctx:
            ctx.prec = 80
            offset = self._scaled(value) - self.low
            return math.floor(Decimal(offset) / self.step)

    def after_index(self, value: JsonValue) -> int:
        """The smallest index whose value is > ``value``."""
        return self.floor_index(value) + 1

    def before_index(self, value: JsonValue) -> int:
        """The largest index whose value is < ``value``."""
        return self.ceil_index(value) - 1

    def value(self, index: int) -> int | float:
        """The value at ``index``: the original number (``float(Decimal(str(x))) == x``)."""
        scaled = self.low + index * self.step
        if self.integral and not self.places:
            return scaled
        exact = Decimal(scaled).scaleb(-self.places)
        return int(exact) if self.integral else float(exact)

    def bound_value(self, index: int) -> float:
        """What Elasticsearch reports for ``min``/``max`` on a numeric field: a double."""
        return float(self.value(index))


def _utc_ms(moment: datetime) -> int:
    return (moment - _EPOCH) // timedelta(milliseconds=1)


def parse_instant(text: JsonValue) -> tuple[int, int]:
    """The span ``[first, last]`` of epoch milliseconds a date or date-time string denotes.

    ``2015-01-01`` spans the whole day; ``2015-01-01 12:00:00`` (or with ``T``, fractions,
    ``Z`` or an offset) is one millisecond.  Naive times are UTC, as in
    Elasticsearch.  Date math (``now``, ``||``) is refused: it has to be resolved by the
    client, and a benchmark's queries are planned once.
    """
    if not isinstance(text, str):
        raise OffGrid(f"{text!r} is not a date string")
    if _DATE_MATH.search(text):
        raise OffGrid(f"{text!r} uses date math")
    found = _DAY.match(text)
    if found:
        try:
            day = date(*map(int, found.groups()))
        except ValueError:
            raise OffGrid(f"{text!r} is not a valid date") from None
        first = _utc_ms(datetime(day.year, day.month, day.day, tzinfo=timezone.utc))
        return first, first + 86_400_000 - 1
    found = _SECOND.match(text)
    if not found:
        raise OffGrid(f"{text!r} is not a date (yyyy-MM-dd) or date-time (yyyy-MM-dd HH:mm:ss)")
    year, month, day_of_month, hour, minute, second = map(int, found.groups()[:6])
    zone = found.group(8)
    try:
        moment = datetime(year, month, day_of_month, hour, minute, second, tzinfo=timezone.utc)
    except ValueError:
        raise OffGrid(f"{text!r} is not a valid date-time") from None
    if zone and zone != "Z":
        sign = 1 if zone[0] == "+" else -1
        digits = zone[1:].replace(":", "")
        moment -= sign * timedelta(hours=int(digits[:2]), minutes=int(digits[2:]))
    fraction = found.group(7) or ""
    first = _utc_ms(moment) + int(fraction[:3].ljust(3, "0"))  # Elasticsearch keeps ms
    return first, first


class DayGrid:
    """Dates ``YYYY-MM-DD`` as ``YYYYMMDD``; decoded to the same text."""

    kind = "day"
    top = DAY_TOP

    def index(self, value: JsonValue) -> int:
        if not isinstance(value, str):
            raise OffGrid(f"{value!r} is not a date string (yyyy-MM-dd)")
        found = _DAY.match(value)
        if not found:
            raise OffGrid(f"{value!r} is not a date (yyyy-MM-dd)")
        year, month, day = map(int, found.groups())
        try:
            date(year, month, day)
        except ValueError:
            raise OffGrid(f"{value!r} is not a valid date") from None
        return year * 10_000 + month * 100 + day

    def value(self, index: int) -> str:
        return f"{index // 10_000:04d}-{index // 100 % 100:02d}-{index % 100:02d}"

    def _moment(self, index: int) -> datetime:
        return datetime(index // 10_000, index // 100 % 100, index % 100, tzinfo=timezone.utc)

    def _from_ms(self, ms: int) -> tuple[int, bool]:
        """(index of the day containing ``ms``, whether ``ms`` is that day's midnight)."""
        moment = _EPOCH + timedelta(milliseconds=ms)
        index = moment.year * 10_000 + moment.month * 100 + moment.day
        return index, ms % 86_400_000 == 0

    def ceil_ms(self, ms: int) -> int:
        """The smallest index whose instant (midnight UTC) is >= ``ms``."""
        index, exact = self._from_ms(ms)
        if exact:
            return index
        return self._from_ms(ms - ms % 86_400_000 + 86_400_000)[0]

    def floor_ms(self, ms: int) -> int:
        return self._from_ms(ms)[0]

    def epoch_ms(self, index: int) -> int:
        return _utc_ms(self._moment(index))


class SecondGrid:
    """Date-times as ``YYYYMMDDhhmmss`` (UTC), decoded with the field's ``pattern``.

    ``pattern`` is ``"space"`` (``yyyy-MM-dd HH:mm:ss``), ``"t"`` (``yyyy-MM-dd'T'HH:mm:ss``)
    or ``"iso"`` (``...T...Z``; the default for fields without a format).  Sub-second
    values cannot be represented and are refused.
    """

    kind = "second"
    top = SECOND_TOP

    def __init__(self, pattern: str = "iso") -> None:
        if pattern not in ("space", "t", "iso"):
            raise ValueError(f"unknown date-time pattern {pattern!r}")
        self.pattern = pattern

    def index(self, value: JsonValue) -> int:
        if isinstance(value, bool) or not isinstance(value, str | int):
            raise OffGrid(f"{value!r} is not a date-time")
        if isinstance(value, int):  # epoch_millis
            if value % 1000:
                raise OffGrid(f"{value!r}: sub-second date-times cannot be represented")
            return self._index(_EPOCH + timedelta(milliseconds=value))
        first, last = parse_instant(value)
        if first != last and not _DAY.match(value):
            raise OffGrid(f"{value!r} is not a date-time")
        if first % 1000:
            raise OffGrid(f"{value!r}: sub-second date-times cannot be represented")
        return self._index(_EPOCH + timedelta(milliseconds=first))

    @staticmethod
    def _index(moment: datetime) -> int:
        return (
            moment.year * 10**10
            + moment.month * 10**8
            + moment.day * 10**6
            + moment.hour * 10**4
            + moment.minute * 100
            + moment.second
        )

    def _moment(self, index: int) -> datetime:
        day, clock = divmod(index, 1_000_000)
        return datetime(
            day // 10_000,
            day // 100 % 100,
            day % 100,
            clock // 10_000,
            clock // 100 % 100,
            clock % 100,
            tzinfo=timezone.utc,
        )

    def value(self, index: int) -> str:
        moment = self._moment(index)
        if self.pattern == "space":
            return moment.strftime("%Y-%m-%d %H:%M:%S")
        if self.pattern == "t":
            return moment.strftime("%Y-%m-%dT%H:%M:%S")
        return moment.strftime("%Y-%m-%dT%H:%M:%SZ")

    def ceil_ms(self, ms: int) -> int:
        seconds = -(-ms // 1000)
        return self._index(_EPOCH + timedelta(seconds=seconds))

    def floor_ms(self, ms: int) -> int:
        return self._index(_EPOCH + timedelta(seconds=ms // 1000))

    def epoch_ms(self, index: int) -> int:
        return _utc_ms(self._moment(index))


_URLSAFE = bytes.maketrans(b"+/", b"-_")


def b64(data: bytes) -> str:
    """Unpadded URL-safe base64: the shortest safe text for keyword values."""
    return binascii.b2a_base64(data, newline=False).translate(_URLSAFE).rstrip(b"=").decode()


def unb64(text: str) -> bytes:
    return base64.urlsafe_b64decode(text + "=" * (-len(text) % 4))


#: What to do about a stored ciphertext this codec cannot decrypt (every such message ends so).
FOREIGN_FIX = (
    "the index was written with another key or another esdash ciphertext format; re-create "
    "it: esdash run --reingest (or --fresh for a new data root), or point data_dir at a fresh "
    "directory"
)


class ForeignCiphertext(ValueError):
    """A stored ciphertext that this codec's key and format did not write.

    AES-SIV authenticates: such a value fails with ``InvalidTag``, which alone names neither
    the field nor the way out.  This error names both (the response decoder adds the query).
    """


def foreign(what: str, exc: Exception) -> ForeignCiphertext:
    """The error for ``what`` (e.g. ``field BodyPart: a stored value``) that ``exc`` refused."""
    detail = f"{type(exc).__name__}: {exc}" if str(exc) else type(exc).__name__
    return ForeignCiphertext(f"{what} does not decrypt ({detail}): {FOREIGN_FIX}")


class StringCipher:
    """Deterministic AES-SIV of one field's string values (associated data: its path).

    ``encrypt`` and ``decrypt`` keep small caches: most keyword fields have few distinct
    values (vendors, body parts), so repeated values cost a dictionary lookup.
    """

    __slots__ = ("_siv", "_ad", "_enc", "_dec", "_limit", "path")

    def __init__(self, key: bytes, path: str, cache: int = 65536) -> None:
        from cryptography.hazmat.primitives.ciphers.aead import AESSIV

        self._siv = AESSIV(key)
        self.path = path
        self._ad = [path.encode()]  # the key is per field and purpose already (HKDF)
        self._enc: dict[str, str] = {}
        self._dec: dict[str, str] = {}
        self._limit = cache

    def __repr__(self) -> str:
        return "StringCipher(<key hidden>)"

    def encrypt(self, text: str) -> str:
        found = self._enc.get(text)
        if found is None:
            found = b64(self._siv.encrypt(text.encode("utf-8"), self._ad))
            if len(self._enc) >= self._limit:
                self._enc.clear()
            self._enc[text] = found
        return found

    def encrypt_uncached(self, text: str) -> str:
        """One value, no cache (the caller keeps its own)."""
        return (
            binascii.b2a_base64(self._siv.encrypt(text.encode(), self._ad), newline=False)
            .translate(_URLSAFE)
            .rstrip(b"=")
            .decode()
        )

    def decrypt(self, token: str) -> str:
        """The plaintext of ``token``; :class:`ForeignCiphertext` unless this cipher wrote it."""
        found = self._dec.get(token)
        if found is None:
            found = self._decrypt(token)
            if len(self._dec) >= self._limit:
                self._dec.clear()
            self._dec[token] = found
        return found

    def _decrypt(self, token: str) -> str:
        from cryptography.exceptions import InvalidTag

        try:
            return self._siv.decrypt(unb64(token), self._ad).decode("utf-8")
        except (InvalidTag, ValueError, TypeError) as exc:  # binascii.Error is a ValueError
            raise foreign(f"field {self.path}: the stored value {str(token)[:40]!r}", exc) from exc

    def clear(self) -> None:
        self._enc.clear()
        self._dec.clear()


#: Every grid: the one an OPE field's values are mapped onto.
Grid = NumberGrid | DayGrid | SecondGrid
