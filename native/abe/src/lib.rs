//! `esdash_abe_native`: the fast path of esdash's ABE document encoder.
//!
//! `esdash_plugins.encryption.abe.codec.AbeCodec.encode_lines` defines what an encrypted
//! document is; this module writes the same bytes for the common case, about 23 µs per MRI document against
//! Python's 70 µs with its parsing (cold caches, 50,000 documents: `bench/abe_encoder.py`),
//! so that client-side encryption costs the ingest ranks little.  It takes a batch of corpus lines (raw JSON)
//! and returns, per line, the encrypted JSON object, or `None` where the line needs
//! anything it does not handle: invalid JSON, a key outside the flat schema (nested
//! objects, dotted keys), a value of an unexpected type, a number off its grid, a
//! date-time with a zone, a fraction or as epoch milliseconds.  Python then encodes (or rejects, with a message naming the field) exactly
//! those lines, so the fast path never decides about errors.
//!
//! Per field the Python side hands over what it derived from the key: the JSON member
//! prefix (`"<encrypted name>":`), and either the AES-SIV key and associated data of a
//! string field, or the OPE key, ranges and grid of a number or day field.  Caches are
//! per field and bounded, like Python's.

use std::borrow::Cow;
use std::fmt;
use std::io::Write;
use std::sync::Mutex;

use aes_siv::siv::Aes256Siv;
use aes_siv::KeyInit;
use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use base64::Engine as _;
use esdash_ope_native::core::Ope;
use pyo3::exceptions::PyValueError;
use pyo3::prelude::*;
use pyo3::types::{PyBytes, PyList};
use rustc_hash::FxHashMap as HashMap;
use serde::de::{self, Deserializer, IgnoredAny, MapAccess, SeqAccess, Visitor};
use serde::Deserialize;
use serde_json::Number;

/// Entries per field cache before it starts over (bounded memory on long runs).
const CACHE_LIMIT: usize = 65536;
/// Lookups over which a text field's cache must earn its keep (see [`CacheUse`]).
const CACHE_WINDOW: u32 = 4096;
/// A text cache stays on while at least 1 in this many lookups hits.
const CACHE_MIN_SHARE: u32 = 8;
/// Memo depth of the OPE contexts (what esdash_plugins.encryption.abe.ope uses; it does not
/// change ciphertexts).
const MEMO_DEPTH: u32 = 16;
/// Largest float magnitude taken here: below 2^53 a double's shortest decimal text is
/// what Python's `repr` gives in positional notation.
const FLOAT_LIMIT: f64 = 9_007_199_254_740_992.0;

/// An OPE field's grid: `index = (scaled(x) - low) / step` on integers scaled by 10^places.
struct NumberGrid {
    places: u32,
    low: i128,
    step: i128,
    top: i128,
}

/// A number as parsed, the key of a field's value cache (no text round trip on a hit).
#[derive(Clone, Copy, PartialEq, Eq, Hash)]
enum NumberKey {
    Signed(i64),
    Unsigned(u64),
    Float(u64),
}

impl NumberKey {
    fn of(number: &Number) -> Option<NumberKey> {
        if let Some(value) = number.as_i64() {
            Some(NumberKey::Signed(value))
        } else if let Some(value) = number.as_u64() {
            Some(NumberKey::Unsigned(value))
        } else {
            number
                .as_f64()
                .map(|value| NumberKey::Float(value.to_bits()))
        }
    }
}

enum Kind {
    Text {
        siv: Box<Aes256Siv>,
        ad: Vec<u8>,
        cache: HashMap<String, String>,
        used: CacheUse,
    },
    Number {
        grid: NumberGrid,
        ope: Ope,
        /// grid index -> ciphertext
        cache: HashMap<i128, i128>,
        /// number as parsed -> ciphertext
        values: HashMap<NumberKey, i128>,
    },
    /// Dates (`YYYYMMDD`) or, with `seconds`, date-times (`YYYYMMDDhhmmss`).
    Date {
        ope: Ope,
        cache: HashMap<i128, i128>,
        seconds: bool,
    },
}

/// Whether a text field's cache pays: fields of unique values (free text, identifiers)
/// would fill it with kilobytes per document and never hit, so it is switched off for
/// them after a window of lookups in which fewer than 1 in [`CACHE_MIN_SHARE`] hit.
/// Only the speed depends on it, never the output.
struct CacheUse {
    lookups: u32,
    hits: u32,
    on: bool,
}

impl CacheUse {
    fn new() -> CacheUse {
        CacheUse {
            lookups: 0,
            hits: 0,
            on: true,
        }
    }

    /// Count one lookup; `false` once the cache has been switched off.
    fn record(&mut self, hit: bool) -> bool {
        self.lookups += 1;
        self.hits += u32::from(hit);
        if self.lookups == CACHE_WINDOW {
            self.on = self.hits * CACHE_MIN_SHARE >= self.lookups;
            self.lookups = 0;
            self.hits = 0;
        }
        self.on
    }
}

struct Field {
    /// `"<encrypted name>":`, written before the value.
    member: Vec<u8>,
    kind: Kind,
}

struct Inner {
    fields: Vec<Field>,
    by_key: HashMap<String, usize>,
}

// ------------------------------------------------------------------------ documents

/// A member's value as parsed, strings borrowed from the line where they have no escapes.
/// Objects and booleans are never encoded here, so they are only recognised.
enum Item<'a> {
    Null,
    Number(Number),
    Text(Cow<'a, str>),
    List(Vec<Item<'a>>),
    Other,
}

/// A document: its members in line order (duplicates kept; see [`Inner::resolve`]).
struct Document<'a>(Vec<(Cow<'a, str>, Item<'a>)>);

struct Key<'a>(Cow<'a, str>);

struct ItemVisitor;
struct KeyVisitor;
struct DocumentVisitor;

impl<'de> Visitor<'de> for KeyVisitor {
    type Value = Key<'de>;
    fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
        f.write_str("a member name")
    }
    fn visit_borrowed_str<E: de::Error>(self, v: &'de str) -> Result<Key<'de>, E> {
        Ok(Key(Cow::Borrowed(v)))
    }
    fn visit_str<E: de::Error>(self, v: &str) -> Result<Key<'de>, E> {
        Ok(Key(Cow::Owned(v.to_owned())))
    }
}

impl<'de> Deserialize<'de> for Key<'de> {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        deserializer.deserialize_str(KeyVisitor)
    }
}

impl<'de> Visitor<'de> for ItemVisitor {
    type Value = Item<'de>;
    fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
        f.write_str("a JSON value")
    }
    fn visit_unit<E: de::Error>(self) -> Result<Item<'de>, E> {
        Ok(Item::Null)
    }
    fn visit_bool<E: de::Error>(self, _: bool) -> Result<Item<'de>, E> {
        Ok(Item::Other)
    }
    fn visit_i64<E: de::Error>(self, v: i64) -> Result<Item<'de>, E> {
        Ok(Item::Number(v.into()))
    }
    fn visit_u64<E: de::Error>(self, v: u64) -> Result<Item<'de>, E> {
        Ok(Item::Number(v.into()))
    }
    fn visit_f64<E: de::Error>(self, v: f64) -> Result<Item<'de>, E> {
        Ok(Number::from_f64(v).map_or(Item::Other, Item::Number))
    }
    fn visit_borrowed_str<E: de::Error>(self, v: &'de str) -> Result<Item<'de>, E> {
        Ok(Item::Text(Cow::Borrowed(v)))
    }
    fn visit_str<E: de::Error>(self, v: &str) -> Result<Item<'de>, E> {
        Ok(Item::Text(Cow::Owned(v.to_owned())))
    }
    fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<Item<'de>, A::Error> {
        let mut items = Vec::new();
        while let Some(item) = seq.next_element_seed(ItemSeed)? {
            items.push(item);
        }
        Ok(Item::List(items))
    }
    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Item<'de>, A::Error> {
        while map.next_entry::<IgnoredAny, IgnoredAny>()?.is_some() {}
        Ok(Item::Other)
    }
}

struct ItemSeed;

impl<'de> de::DeserializeSeed<'de> for ItemSeed {
    type Value = Item<'de>;
    fn deserialize<D: Deserializer<'de>>(self, deserializer: D) -> Result<Item<'de>, D::Error> {
        deserializer.deserialize_any(ItemVisitor)
    }
}

impl<'de> Visitor<'de> for DocumentVisitor {
    type Value = Document<'de>;
    fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
        f.write_str("a JSON object")
    }
    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Document<'de>, A::Error> {
        let mut members = Vec::with_capacity(map.size_hint().unwrap_or(64));
        while let Some(key) = map.next_key::<Key<'de>>()? {
            members.push((key.0, map.next_value_seed(ItemSeed)?));
        }
        Ok(Document(members))
    }
}

impl<'de> Deserialize<'de> for Document<'de> {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        deserializer.deserialize_map(DocumentVisitor)
    }
}

// --------------------------------------------------------------------------- values

/// The scaled integer of a JSON number, if it is exactly one at `places` decimals.
fn scaled(number: &Number, places: u32) -> Option<i128> {
    let factor = 10i128.checked_pow(places)?;
    if let Some(value) = number.as_i64() {
        return i128::from(value).checked_mul(factor);
    }
    if let Some(value) = number.as_u64() {
        return i128::from(value).checked_mul(factor);
    }
    let value = number.as_f64()?;
    if !value.is_finite() || value.abs() >= FLOAT_LIMIT {
        return None;
    }
    // Rust's Display is the shortest text that reads back as the same double, never in
    // exponent form: the digits of Python's repr, hence of Decimal(repr(x)).
    let text = format!("{value}");
    let (negative, digits) = match text.strip_prefix('-') {
        Some(rest) => (true, rest),
        None => (false, text.as_str()),
    };
    let (whole, fraction) = digits.split_once('.').unwrap_or((digits, ""));
    let fraction = fraction.trim_end_matches('0');
    if fraction.len() > places as usize {
        return None; // more decimals than the grid has: not on it
    }
    let mut joined = String::with_capacity(whole.len() + places as usize);
    joined.push_str(whole);
    joined.push_str(fraction);
    for _ in fraction.len()..places as usize {
        joined.push('0');
    }
    let magnitude: i128 = joined.parse().ok()?;
    Some(if negative { -magnitude } else { magnitude })
}

impl NumberGrid {
    fn index(&self, number: &Number) -> Option<i128> {
        let offset = scaled(number, self.places)?.checked_sub(self.low)?;
        if offset % self.step != 0 {
            return None;
        }
        let index = offset / self.step;
        (0..=self.top).contains(&index).then_some(index)
    }
}

fn two_digits(bytes: &[u8]) -> Option<u32> {
    match bytes {
        [a @ b'0'..=b'9', b @ b'0'..=b'9'] => Some(u32::from(a - b'0') * 10 + u32::from(b - b'0')),
        _ => None,
    }
}

/// `YYYY-MM-DD` (ASCII digits, a valid Gregorian date, year >= 1) as `YYYYMMDD`.
fn day_index(bytes: &[u8]) -> Option<i128> {
    if bytes.len() != 10 || bytes[4] != b'-' || bytes[7] != b'-' {
        return None;
    }
    let year = two_digits(&bytes[0..2])? * 100 + two_digits(&bytes[2..4])?;
    let month = two_digits(&bytes[5..7])?;
    let day = two_digits(&bytes[8..10])?;
    let leap = (year % 4 == 0 && year % 100 != 0) || year % 400 == 0;
    let days = match month {
        1 | 3 | 5 | 7 | 8 | 10 | 12 => 31,
        4 | 6 | 9 | 11 => 30,
        2 if leap => 29,
        2 => 28,
        _ => return None,
    };
    if year == 0 || day == 0 || day > days {
        return None;
    }
    Some(i128::from(year * 10_000 + month * 100 + day))
}

/// `YYYY-MM-DD HH:MM:SS` (or `T` between, UTC, no fraction or zone) or a bare date (its
/// midnight) as `YYYYMMDDhhmmss`; every other form (zones, fractions, epoch millis) is
/// Python's.
fn second_index(bytes: &[u8]) -> Option<i128> {
    if bytes.len() == 10 {
        return Some(day_index(bytes)? * 1_000_000);
    }
    if bytes.len() != 19
        || !matches!(bytes[10], b' ' | b'T')
        || bytes[13] != b':'
        || bytes[16] != b':'
    {
        return None;
    }
    let hour = two_digits(&bytes[11..13]).filter(|h| *h < 24)?;
    let minute = two_digits(&bytes[14..16]).filter(|m| *m < 60)?;
    let second = two_digits(&bytes[17..19]).filter(|s| *s < 60)?;
    Some(day_index(&bytes[..10])? * 1_000_000 + i128::from(hour * 10_000 + minute * 100 + second))
}

fn remember<K: std::hash::Hash + Eq, V>(cache: &mut HashMap<K, V>, key: K, value: V) {
    if cache.len() >= CACHE_LIMIT {
        cache.clear();
    }
    cache.insert(key, value);
}

/// One OPE ciphertext, from the field's cache or its context.
fn ope_value(ope: &mut Ope, cache: &mut HashMap<i128, i128>, index: i128) -> Option<i128> {
    if let Some(found) = cache.get(&index) {
        return Some(*found);
    }
    let found = ope.encrypt(index).ok()?;
    remember(cache, index, found);
    Some(found)
}

/// Appends `"<token>"` for one string value of a text field.
fn write_text(
    out: &mut Vec<u8>,
    siv: &mut Aes256Siv,
    ad: &[u8],
    cache: &mut HashMap<String, String>,
    used: &mut CacheUse,
    text: &str,
) -> Option<()> {
    out.push(b'"');
    if let Some(token) = if used.on { cache.get(text) } else { None } {
        out.extend_from_slice(token.as_bytes());
        used.record(true);
        out.push(b'"');
        return Some(());
    }
    let sealed = siv.encrypt([ad], text.as_bytes()).ok()?;
    if used.on && used.record(false) {
        let token = URL_SAFE_NO_PAD.encode(&sealed);
        out.extend_from_slice(token.as_bytes());
        remember(cache, text.to_owned(), token);
    } else {
        if used.on || !cache.is_empty() {
            *cache = HashMap::default(); // switched off: give the memory back
        }
        // Straight into the document, no token string.
        let start = out.len();
        out.resize(start + sealed.len().div_ceil(3) * 4, 0);
        let written = URL_SAFE_NO_PAD
            .encode_slice(&sealed, &mut out[start..])
            .ok()?;
        out.truncate(start + written);
    }
    out.push(b'"');
    Some(())
}

// ---------------------------------------------------------------------------- fields

/// A member resolved against its field (pass 1 of a batch).
enum Resolved<'i, 'a> {
    Null,
    /// A string of a text field.
    Text(&'i str),
    /// An array of strings of a text field.
    Texts(&'i [Item<'a>]),
    /// A number's ciphertext, found in the field's value cache.
    Cipher(i128),
    /// A grid index still to encrypt, and the number's cache key (days have none).
    Index(i128, Option<NumberKey>),
}

impl Field {
    /// The member's resolved form; `None` when Python has to decide.
    fn resolve<'i, 'a>(&self, item: &'i Item<'a>) -> Option<Resolved<'i, 'a>> {
        match (&self.kind, item) {
            (_, Item::Null) => Some(Resolved::Null),
            (Kind::Text { .. }, Item::Text(text)) => Some(Resolved::Text(text)),
            (Kind::Text { .. }, Item::List(items))
                if items.iter().all(|item| matches!(item, Item::Text(_))) =>
            {
                Some(Resolved::Texts(items))
            }
            (Kind::Number { grid, values, .. }, Item::Number(number)) => {
                let key = NumberKey::of(number)?;
                match values.get(&key) {
                    Some(found) => Some(Resolved::Cipher(*found)),
                    None => Some(Resolved::Index(grid.index(number)?, Some(key))),
                }
            }
            (Kind::Date { seconds, .. }, Item::Text(text)) => {
                let bytes = text.as_bytes();
                let index = if *seconds {
                    second_index(bytes)
                } else {
                    day_index(bytes)
                };
                Some(Resolved::Index(index?, None))
            }
            _ => None,
        }
    }

    /// Whether `index` still has to be encrypted (not in the field's index cache).
    fn is_new(&self, index: i128) -> bool {
        match &self.kind {
            Kind::Number { cache, .. } | Kind::Date { cache, .. } => !cache.contains_key(&index),
            Kind::Text { .. } => false,
        }
    }

    /// Encrypt the new indices of a batch in one walk of the OPE tree (shared path prefixes
    /// are computed once), and cache them.
    fn prepare(&mut self, pending: &mut Vec<i128>) {
        let (Kind::Number { ope, cache, .. } | Kind::Date { ope, cache, .. }) = &mut self.kind
        else {
            return;
        };
        pending.sort_unstable();
        pending.dedup();
        if cache.len() + pending.len() > CACHE_LIMIT {
            cache.clear();
        }
        // On an error (a value pyope cannot encrypt either) nothing is cached here; the
        // write pass then meets it alone and leaves that document to Python.
        if let Ok(found) = ope.encrypt_sorted(pending) {
            cache.extend(pending.iter().copied().zip(found));
        }
    }

    /// Appends `"<name>":<ciphertext>`; `None` when Python has to decide.
    fn write(&mut self, out: &mut Vec<u8>, value: &Resolved<'_, '_>) -> Option<()> {
        out.extend_from_slice(&self.member);
        match (&mut self.kind, value) {
            (_, Resolved::Null) => out.extend_from_slice(b"null"),
            (
                Kind::Text {
                    siv,
                    ad,
                    cache,
                    used,
                },
                Resolved::Text(text),
            ) => write_text(out, siv, ad, cache, used, text)?,
            (
                Kind::Text {
                    siv,
                    ad,
                    cache,
                    used,
                },
                Resolved::Texts(items),
            ) => {
                out.push(b'[');
                for (position, item) in items.iter().enumerate() {
                    let Item::Text(text) = item else { return None };
                    if position > 0 {
                        out.push(b',');
                    }
                    write_text(out, siv, ad, cache, used, text)?;
                }
                out.push(b']');
            }
            (_, Resolved::Cipher(found)) => write!(out, "{found}").ok()?,
            (
                Kind::Number {
                    ope, cache, values, ..
                },
                Resolved::Index(index, key),
            ) => {
                let found = ope_value(ope, cache, *index)?;
                if let Some(key) = key {
                    remember(values, *key, found);
                }
                write!(out, "{found}").ok()?;
            }
            (Kind::Date { ope, cache, .. }, Resolved::Index(index, _)) => {
                let found = ope_value(ope, cache, *index)?;
                write!(out, "{found}").ok()?;
            }
            _ => return None,
        }
        Some(())
    }
}

impl Inner {
    /// A document's members resolved against the fields, in document order; `None` for
    /// an unknown key or a repeated one (Python keeps the last value at the first place).
    fn resolve<'i, 'a>(
        &self,
        document: &'i Document<'a>,
        seen: &mut [bool],
    ) -> Option<Vec<(usize, Resolved<'i, 'a>)>> {
        seen.fill(false);
        let mut members = Vec::with_capacity(document.0.len());
        for (key, item) in &document.0 {
            let field = *self.by_key.get(key.as_ref())?;
            if std::mem::replace(&mut seen[field], true) {
                return None;
            }
            members.push((field, self.fields[field].resolve(item)?));
        }
        Some(members)
    }

    /// A batch in three passes: parse and resolve every line, encrypt each field's new
    /// numbers in one sorted walk, write the objects.
    fn encode(&mut self, lines: &[&[u8]]) -> Vec<Option<Vec<u8>>> {
        let parsed: Vec<Option<Document<'_>>> = lines
            .iter()
            .map(|line| serde_json::from_slice::<Document<'_>>(line).ok())
            .collect();
        let mut seen = vec![false; self.fields.len()];
        let resolved: Vec<Option<Vec<(usize, Resolved<'_, '_>)>>> = parsed
            .iter()
            .map(|document| document.as_ref().and_then(|d| self.resolve(d, &mut seen)))
            .collect();
        let mut pending: Vec<Vec<i128>> = vec![Vec::new(); self.fields.len()];
        for members in resolved.iter().flatten() {
            for (field, value) in members {
                if let Resolved::Index(index, _) = value {
                    if self.fields[*field].is_new(*index) {
                        pending[*field].push(*index);
                    }
                }
            }
        }
        for (field, indices) in pending.iter_mut().enumerate() {
            if !indices.is_empty() {
                self.fields[field].prepare(indices);
            }
        }
        resolved
            .iter()
            .zip(lines)
            .map(|(members, line)| {
                let members = members.as_ref()?;
                let mut out = Vec::with_capacity(line.len() * 3 + 64);
                out.push(b'{');
                for (position, (field, value)) in members.iter().enumerate() {
                    if position > 0 {
                        out.push(b',');
                    }
                    self.fields[*field].write(&mut out, value)?;
                }
                out.push(b'}');
                Some(out)
            })
            .collect()
    }
}

fn int(item: &Bound<'_, PyAny>, what: &str) -> PyResult<i128> {
    if let Ok(value) = item.extract::<i64>() {
        return Ok(value.into());
    }
    item.extract::<u64>()
        .map(i128::from)
        .map_err(|_| PyValueError::new_err(format!("{what}: not an integer within i64/u64")))
}

fn ope_context(key: &[u8], top: i128, out_top: i128) -> PyResult<Ope> {
    Ope::new(key, (0, top), (0, out_top), MEMO_DEPTH)
        .map_err(|err| PyValueError::new_err(err.to_string()))
}

/// The encoder of one codec's flat top-level fields.
#[pyclass(frozen, module = "esdash_abe_native")]
struct LineEncoder {
    inner: Mutex<Inner>,
}

#[pymethods]
impl LineEncoder {
    /// `fields`: one tuple per top-level field,
    /// `("text", key, member, siv_key, associated_data)`,
    /// `("number", key, member, ope_key, top, out_top, places, low, step)` or
    /// `("day", key, member, ope_key, top, out_top)` or the same with `"second"`.
    #[new]
    fn new(fields: &Bound<'_, PyList>) -> PyResult<LineEncoder> {
        let mut inner = Inner {
            fields: Vec::new(),
            by_key: HashMap::default(),
        };
        for spec in fields.iter() {
            let kind: String = spec.get_item(0)?.extract()?;
            let key: String = spec.get_item(1)?.extract()?;
            let member: String = spec.get_item(2)?.extract()?;
            let secret: Vec<u8> = spec.get_item(3)?.extract()?;
            let kind = match kind.as_str() {
                "text" => Kind::Text {
                    siv: Box::new(
                        Aes256Siv::new_from_slice(&secret)
                            .map_err(|_| PyValueError::new_err("AES-SIV keys are 64 bytes here"))?,
                    ),
                    ad: spec.get_item(4)?.extract()?,
                    cache: HashMap::default(),
                    used: CacheUse::new(),
                },
                "number" | "day" | "second" => {
                    let top = int(&spec.get_item(4)?, "top")?;
                    let out_top = int(&spec.get_item(5)?, "out_top")?;
                    let ope = ope_context(&secret, top, out_top)?;
                    if kind != "number" {
                        Kind::Date {
                            ope,
                            cache: HashMap::default(),
                            seconds: kind == "second",
                        }
                    } else {
                        let step = int(&spec.get_item(8)?, "step")?;
                        if step <= 0 {
                            return Err(PyValueError::new_err("step must be positive"));
                        }
                        Kind::Number {
                            grid: NumberGrid {
                                places: spec.get_item(6)?.extract()?,
                                low: int(&spec.get_item(7)?, "low")?,
                                step,
                                top,
                            },
                            ope,
                            cache: HashMap::default(),
                            values: HashMap::default(),
                        }
                    }
                }
                other => {
                    return Err(PyValueError::new_err(format!(
                        "unknown field kind {other:?}"
                    )))
                }
            };
            inner.by_key.insert(key, inner.fields.len());
            inner.fields.push(Field {
                member: member.into_bytes(),
                kind,
            });
        }
        Ok(LineEncoder {
            inner: Mutex::new(inner),
        })
    }

    /// Per line: the encrypted JSON object, or `None` where Python has to encode it.
    fn encode<'py>(
        &self,
        py: Python<'py>,
        lines: &Bound<'py, PyList>,
    ) -> PyResult<Vec<Option<Bound<'py, PyBytes>>>> {
        let mut inner = self
            .inner
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner());
        let items: Vec<Bound<'py, PyBytes>> = lines
            .iter()
            .map(|line| line.cast_into::<PyBytes>().map_err(PyErr::from))
            .collect::<PyResult<_>>()?;
        let raw: Vec<&[u8]> = items.iter().map(|line| line.as_bytes()).collect();
        Ok(inner
            .encode(&raw)
            .into_iter()
            .map(|encoded| encoded.map(|encoded| PyBytes::new(py, &encoded)))
            .collect())
    }

    /// Forget the caches (they hold plaintexts; the OPE memos are as sensitive as keys).
    fn clear(&self) {
        let mut inner = self
            .inner
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner());
        for field in &mut inner.fields {
            match &mut field.kind {
                Kind::Text { cache, used, .. } => {
                    cache.clear();
                    *used = CacheUse::new();
                }
                Kind::Number {
                    ope, cache, values, ..
                } => {
                    ope.clear();
                    cache.clear();
                    values.clear();
                }
                Kind::Date { ope, cache, .. } => {
                    ope.clear();
                    cache.clear();
                }
            }
        }
    }

    fn __repr__(&self) -> String {
        "<esdash_abe_native.LineEncoder>".to_string() // never a key
    }
}

#[pymodule]
fn esdash_abe_native(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add_class::<LineEncoder>()?;
    Ok(())
}
