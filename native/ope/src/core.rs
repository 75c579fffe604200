//! The BCLO order-preserving cipher, bit-identical to pyope 0.2.2, without any Python.
//!
//! Written from the algorithm description in esdash's research notes (`ope.md` §1 and the
//! porting checklist in §4.1), not translated from pyope's source.  pyope is only the test
//! oracle.  The places where a port silently diverges are marked `PYOPE:` below; each one
//! reproduces a Python number rule (integer products are exact, `int / float` converts the
//! integer to a double first, operations run strictly left to right, no fused multiply-add).
//!
//! All plaintexts, ciphertexts and interval ends are `i128`: ranges may span
//! [-2^63, 2^64 - 1] (Elasticsearch `long` and `unsigned_long`), so sizes reach 1.5 * 2^64 and
//! the one exact product in HRUA reaches 2^127, which `u128` holds.

use std::collections::HashMap;
use std::hash::{BuildHasherDefault, Hasher};

use aes::cipher::{BlockCipherEncrypt, KeyInit};
use aes::Aes256Enc;
use sha2::block_api::compress256;
use sha2::{Digest, Sha256};

/// Smallest value the native backend accepts anywhere (an `i64`).
pub const VALUE_MIN: i128 = i64::MIN as i128;
/// Largest value the native backend accepts anywhere (a `u64`, ES `unsigned_long`).
pub const VALUE_MAX: i128 = u64::MAX as i128;
/// Deepest node memo: a path index must fit in a `u64`, and 2^40 nodes is far past any RAM.
pub const MEMO_DEPTH_MAX: u32 = 40;

/// Why an operation failed.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum OpeError {
    /// A range is empty, inverted, outside [`VALUE_MIN`, `VALUE_MAX`], or in is larger than out.
    InvalidRange(String),
    /// A plaintext outside the in range or a ciphertext outside the out range.
    OutOfRange(String),
    /// A ciphertext that no plaintext encrypts to.
    InvalidCiphertext,
    /// An HRUA draw of exactly 0.0: pyope divides by it and raises `ZeroDivisionError`, so
    /// the plaintexts under this node cannot be encrypted by pyope either (p = 2^-32 per draw).
    ZeroDraw,
    /// An exact HRUA product exceeded `u128`; unreachable for ranges within the limits above.
    Overflow,
}

impl std::fmt::Display for OpeError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            OpeError::InvalidRange(why) | OpeError::OutOfRange(why) => f.write_str(why),
            OpeError::InvalidCiphertext => {
                f.write_str("invalid ciphertext: no plaintext maps to it")
            }
            OpeError::ZeroDraw => f.write_str(
                "the hypergeometric sampler drew exactly 0.0 for a node on this value's path; \
                 pyope 0.2.2 raises ZeroDivisionError here, so there is no compatible ciphertext",
            ),
            OpeError::Overflow => f.write_str("internal overflow in the hypergeometric sampler"),
        }
    }
}

impl std::error::Error for OpeError {}

// ------------------------------------------------------------------ exact, fast conversions

/// `v as f64` (round to nearest, ties to even, like Python's int -> float), through the
/// one-instruction `i64` conversion when `v` fits: `i128` conversions are software routines.
#[inline]
fn to_f64(v: i128) -> f64 {
    match i64::try_from(v) {
        Ok(small) => small as f64,
        Err(_) => wide_to_f64(v),
    }
}

/// `to_f64` for the unsigned exact product.
#[inline]
fn to_f64_u(v: u128) -> f64 {
    match u64::try_from(v) {
        Ok(small) => small as f64,
        Err(_) => wide_to_f64_u(v),
    }
}

// Out of line on purpose: inlined, LLVM sees that both branches convert the same value and
// folds them back into the software routine for every call.
#[inline(never)]
#[cold]
fn wide_to_f64(v: i128) -> f64 {
    v as f64
}

#[inline(never)]
fn wide_to_f64_u(v: u128) -> f64 {
    v as f64
}

/// `v.floor()` without the libm call a generic x86-64 build makes (no SSE4.1 `roundsd`).
#[inline]
fn floor(v: f64) -> f64 {
    if v.abs() < 4503599627370496.0 {
        // |v| < 2^52: truncation through i64 is exact; step down for negative fractions.
        let t = v as i64 as f64;
        if t > v {
            t - 1.0
        } else if t == 0.0 {
            0.0f64.copysign(v) // floor(-0.0) is -0.0
        } else {
            t
        }
    } else {
        v.floor() // integral already, or NaN/infinite
    }
}

/// `math.floor(v)` as an integer (Python's `int` result), `v` finite.
#[inline]
fn floor_int(v: f64) -> i128 {
    let f = floor(v);
    if f.abs() < 9.2e18 {
        f as i64 as i128
    } else {
        f as i128
    }
}

/// `int(math.ceil(n / 2.0))`: pyope computes the midpoint offset in floating point.  Up to
/// 2^53 the double is exact and this is `(n + 1) / 2`; beyond, `n` rounds first.
#[inline]
fn half_up(n: i128) -> i128 {
    if n <= 1 << 53 {
        (n + 1) >> 1
    } else {
        (n as f64 / 2.0).ceil() as i128
    }
}

// --------------------------------------------------------------------------- HMAC-SHA256

const SHA256_H0: [u32; 8] = [
    0x6a09e667, 0xbb67ae85, 0x3c6ef372, 0xa54ff53a, 0x510e527f, 0x9b05688c, 0x1f83d9ab, 0x5be0cd19,
];

/// HMAC-SHA256 under one key with the inner and outer pad states precomputed, so a short
/// message (every seed is at most 41 bytes) costs exactly two compressions.
#[derive(Clone)]
struct HmacKey {
    inner: [u32; 8],
    outer: [u32; 8],
}

impl HmacKey {
    fn new(key: &[u8]) -> HmacKey {
        let mut block = [0u8; 64];
        if key.len() > 64 {
            block[..32].copy_from_slice(&Sha256::digest(key));
        } else {
            block[..key.len()].copy_from_slice(key);
        }
        let pad = |byte: u8| {
            let mut state = SHA256_H0;
            compress256(&mut state, &[block.map(|b| b ^ byte)]);
            state
        };
        HmacKey {
            inner: pad(0x36),
            outer: pad(0x5c),
        }
    }

    /// HMAC(key, message) for a message of at most 55 bytes.
    fn mac(&self, message: &[u8]) -> [u8; 32] {
        debug_assert!(message.len() <= 55);
        let mut block = [0u8; 64];
        block[..message.len()].copy_from_slice(message);
        block[message.len()] = 0x80;
        block[56..].copy_from_slice(&((64 + message.len() as u64) * 8).to_be_bytes());
        let mut state = self.inner;
        compress256(&mut state, &[block]);
        let mut block = [0u8; 64];
        for (chunk, word) in block.chunks_exact_mut(4).zip(state) {
            chunk.copy_from_slice(&word.to_be_bytes());
        }
        block[32] = 0x80;
        block[56..].copy_from_slice(&((64u64 + 32) * 8).to_be_bytes());
        let mut state = self.outer;
        compress256(&mut state, &[block]);
        let mut out = [0u8; 32];
        for (chunk, word) in out.chunks_exact_mut(4).zip(state) {
            chunk.copy_from_slice(&word.to_be_bytes());
        }
        out
    }
}

// ------------------------------------------------------------------------------ coin tape

/// The random coins of one tree node or leaf: AES-256-CTR keystream under
/// HMAC-SHA256(key, decimal seed), counter block starting at zero (128-bit big-endian).
struct Tape {
    aes: Aes256Enc,
    counter: u128,
    block: [u8; 16],
    /// Next unread bit of `block`; 128 means "generate the next block".
    bit: u32,
}

impl Tape {
    fn new(aes_key: &[u8]) -> Tape {
        Tape {
            aes: Aes256Enc::new_from_slice(aes_key).expect("HMAC-SHA256 output is an AES-256 key"),
            counter: 0,
            block: [0; 16],
            bit: 128,
        }
    }

    fn refill(&mut self) {
        let mut block = aes::Block::from(self.counter.to_be_bytes());
        self.aes.encrypt_block(&mut block);
        self.block.copy_from_slice(&block);
        // PYOPE: the whole 128-bit counter block is the counter (cryptography's CTR mode).
        self.counter = self.counter.wrapping_add(1);
        self.bit = 0;
    }

    /// The next 32 bits as a big-endian word.  Draws start on a fresh tape and take whole
    /// words, so they are always byte- and even word-aligned.
    fn next_word(&mut self) -> u32 {
        if self.bit >= 128 {
            self.refill();
        }
        let at = (self.bit / 8) as usize;
        self.bit += 32;
        u32::from_be_bytes([
            self.block[at],
            self.block[at + 1],
            self.block[at + 2],
            self.block[at + 3],
        ])
    }

    /// One HGD draw: uint32 / (2^32 - 1), a double in [0, 1].
    fn draw(&mut self) -> f64 {
        self.next_word() as f64 / 4294967295.0
    }

    /// The next coin bit, most significant bit of each byte first.
    fn next_bit(&mut self) -> bool {
        if self.bit >= 128 {
            self.refill();
        }
        let byte = self.block[(self.bit / 8) as usize];
        let set = (byte >> (7 - self.bit % 8)) & 1 == 1;
        self.bit += 1;
        set
    }
}

/// Decimal ASCII of `v` (with a leading `-`), which is what pyope feeds to HMAC: `str(v)`.
fn decimal(v: i128, buf: &mut [u8; 48]) -> &[u8] {
    let mut at = buf.len();
    if let Ok(mut u) = u64::try_from(v.unsigned_abs()) {
        // Native 64-bit division; u128 division is a software routine.
        loop {
            at -= 1;
            buf[at] = b'0' + (u % 10) as u8;
            u /= 10;
            if u == 0 {
                break;
            }
        }
        if v < 0 {
            at -= 1;
            buf[at] = b'-';
        }
        return &buf[at..];
    }
    let mut u = v.unsigned_abs();
    loop {
        at -= 1;
        buf[at] = b'0' + (u % 10) as u8;
        u /= 10;
        if u == 0 {
            break;
        }
    }
    if v < 0 {
        at -= 1;
        buf[at] = b'-';
    }
    &buf[at..]
}

// -------------------------------------------------------------------- hypergeometric sampler

/// Zhang & Jin's log-gamma coefficients, as numpy's legacy `loggam` (and pyope) spell them.
#[allow(clippy::excessive_precision)] // spelled as in the reference; same doubles
const LOGGAM_A: [f64; 10] = [
    8.333333333333333e-02,
    -2.777777777777778e-03,
    7.936507936507937e-04,
    -5.952380952380952e-04,
    8.417508417508418e-04,
    -1.917526917526918e-03,
    6.410256410256410e-03,
    -2.955065359477124e-02,
    1.796443723688307e-01,
    -1.39243221690590e+00,
];
/// Stadlober's HRUA constants: 2 * sqrt(2 / e) and 3 - 2 * sqrt(3 / e), to 16 digits.
const HRUA_D1: f64 = 1.7155277699214135;
const HRUA_D2: f64 = 0.8989161620588988;

/// `0.5 * ln(2 * pi)`, computed at run time through the platform libm, as Python does on
/// every call.  A compile-time constant might be folded by a different `log` implementation.
fn half_ln_2pi() -> f64 {
    0.5 * std::hint::black_box(2.0 * std::f64::consts::PI).ln()
}

/// ln(Gamma(x)) for a positive integer argument, evaluated exactly like numpy's legacy
/// `loggam` on the double `x`: series for x > 7, recurrence down from 7 otherwise.
fn loggam(x: i128, half_ln_2pi: f64) -> f64 {
    // PYOPE: the integer argument becomes a double first (rounded to nearest, ties to even).
    let x = to_f64(x);
    if x == 1.0 || x == 2.0 {
        return 0.0;
    }
    let mut x0 = x;
    let mut n = 0i64;
    if x <= 7.0 {
        n = (7.0 - x) as i64;
        x0 = x + n as f64;
    }
    let x2 = 1.0 / (x0 * x0);
    let mut gl0 = LOGGAM_A[9];
    for k in (0..9).rev() {
        gl0 *= x2;
        gl0 += LOGGAM_A[k];
    }
    let mut gl = gl0 / x0 + half_ln_2pi + (x0 - 0.5) * x0.ln() - x0;
    if x <= 7.0 {
        for _ in 0..n {
            gl -= (x0 - 1.0).ln();
            x0 -= 1.0;
        }
    }
    gl
}

/// Number of "good" items when drawing `sample` from `good` + `bad` (numpy's legacy `rhyper`
/// split: HYP inversion for small samples, HRUA ratio-of-uniforms otherwise).
fn rhyper(tape: &mut Tape, sample: i128, good: i128, bad: i128, c: f64) -> Result<i128, OpeError> {
    if sample > 10 {
        hrua(tape, good, bad, sample, c)
    } else {
        Ok(hyp(tape, good, bad, sample))
    }
}

fn hyp(tape: &mut Tape, good: i128, bad: i128, sample: i128) -> i128 {
    let d1 = bad + good - sample;
    let d2 = to_f64(good.min(bad));
    let mut y = d2;
    let mut k = sample;
    while y > 0.0 {
        let u = tape.draw();
        // PYOPE: `Y / (d1 + K)` is a double divided by the exact integer converted to double.
        y -= floor(u + y / to_f64(d1 + k));
        k -= 1;
        if k == 0 {
            break;
        }
    }
    // PYOPE: `int()` of a double truncates toward zero.
    let z = (d2 - y) as i128;
    if good > bad {
        sample - z
    } else {
        z
    }
}

fn hrua(tape: &mut Tape, good: i128, bad: i128, sample: i128, c: f64) -> Result<i128, OpeError> {
    let mingoodbad = good.min(bad);
    let maxgoodbad = good.max(bad);
    let popsize = good + bad;
    let m = sample.min(popsize - sample);
    let d4 = to_f64(mingoodbad) / to_f64(popsize);
    let d5 = 1.0 - d4;
    let d6 = to_f64(m) * d4 + 0.5;
    // PYOPE: `(popsize - m) * sample` is an exact integer product, rounded to a double once.
    let product = ((popsize - m) as u128)
        .checked_mul(sample as u128)
        .ok_or(OpeError::Overflow)?;
    let d7 = (to_f64_u(product) * d4 * d5 / to_f64(popsize - 1) + 0.5).sqrt();
    let d8 = HRUA_D1 * d7 + HRUA_D2;
    let d9 = floor_int(to_f64(m + 1) * to_f64(mingoodbad + 1) / to_f64(popsize + 2));
    let d10 = loggam(d9 + 1, c)
        + loggam(mingoodbad - d9 + 1, c)
        + loggam(m - d9 + 1, c)
        + loggam(maxgoodbad - m + d9 + 1, c);
    // PYOPE: `min(float, int)` keeps the first unless the second is smaller; the floor is an
    // exact integer, so comparing it as a double is the same as Python's exact comparison.
    let first = to_f64(m.min(mingoodbad)) + 1.0;
    let second = floor(d6 + 16.0 * d7);
    let d11 = if second < first { second } else { first };
    let z = loop {
        let x = tape.draw();
        let y = tape.draw();
        if x == 0.0 {
            return Err(OpeError::ZeroDraw);
        }
        let w = d6 + d8 * (y - 0.5) / x;
        if w < 0.0 || w >= d11 {
            continue;
        }
        let z = floor_int(w);
        let t = d10
            - (loggam(z + 1, c)
                + loggam(mingoodbad - z + 1, c)
                + loggam(m - z + 1, c)
                + loggam(maxgoodbad - m + z + 1, c));
        if x * (4.0 - x) - 3.0 <= t {
            break z;
        }
        if x * (x - t) >= 1.0 {
            continue;
        }
        if 2.0 * x.ln() <= t {
            break z;
        }
    };
    let z = if good > bad { m - z } else { z };
    Ok(if m < sample { good - z } else { z })
}

// ---------------------------------------------------------------------------- node memo

/// Multiplicative hashing for the memo's `u64` path keys (SipHash would dominate a lookup).
#[derive(Default)]
struct PathHasher(u64);

impl Hasher for PathHasher {
    fn finish(&self) -> u64 {
        self.0
    }
    fn write(&mut self, bytes: &[u8]) {
        for &b in bytes {
            self.0 = (self.0.rotate_left(8) ^ b as u64).wrapping_mul(0x9E37_79B9_7F4A_7C15);
        }
    }
    fn write_u64(&mut self, n: u64) {
        self.0 = n.wrapping_mul(0x9E37_79B9_7F4A_7C15);
    }
}

// ------------------------------------------------------------------------------- the cipher

/// One (key, in range, out range) context with its node memo.
///
/// The range side of the BCLO tree halves independently of the key, so a node is fixed by its
/// path from the root; its split `x` is a constant of the context.  Nodes shallower than
/// `memo_depth` are remembered (the top levels are shared by nearly every value), deeper ones
/// are recomputed (they are rarely shared, and a full memo would grow with the domain).
pub struct Ope {
    mac: HmacKey,
    in_lo: i128,
    in_hi: i128,
    out_lo: i128,
    out_hi: i128,
    memo_depth: u32,
    memo: HashMap<u64, i128, BuildHasherDefault<PathHasher>>,
    half_ln_2pi: f64,
}

/// A node of the descent: domain [dlo, dhi], range [rlo, rhi], heap path index and depth.
#[derive(Clone, Copy)]
struct Node {
    dlo: i128,
    dhi: i128,
    rlo: i128,
    rhi: i128,
    path: u64,
    depth: u32,
}

impl Node {
    fn left(self, x: i128, y: i128) -> Node {
        Node {
            dhi: x,
            rhi: y,
            path: self.path << 1,
            depth: self.depth + 1,
            ..self
        }
    }
    fn right(self, x: i128, y: i128) -> Node {
        Node {
            dlo: x + 1,
            rlo: y + 1,
            path: self.path << 1 | 1,
            depth: self.depth + 1,
            ..self
        }
    }
}

fn check_range(name: &str, lo: i128, hi: i128) -> Result<(), OpeError> {
    if lo > hi {
        return Err(OpeError::InvalidRange(format!(
            "{name} range: the start {lo} is greater than the end {hi}"
        )));
    }
    if lo < VALUE_MIN || hi > VALUE_MAX {
        return Err(OpeError::InvalidRange(format!(
            "{name} range [{lo}, {hi}] exceeds the native backend's limits [-2^63, 2^64-1]"
        )));
    }
    Ok(())
}

impl Ope {
    /// A context; `key` is used verbatim as the HMAC key (no derivation), as pyope does.
    pub fn new(
        key: &[u8],
        in_range: (i128, i128),
        out_range: (i128, i128),
        memo_depth: u32,
    ) -> Result<Ope, OpeError> {
        check_range("in", in_range.0, in_range.1)?;
        check_range("out", out_range.0, out_range.1)?;
        if in_range.1 - in_range.0 > out_range.1 - out_range.0 {
            return Err(OpeError::InvalidRange(
                "the in range is larger than the out range".to_string(),
            ));
        }
        if memo_depth > MEMO_DEPTH_MAX {
            return Err(OpeError::InvalidRange(format!(
                "memo_depth {memo_depth} is above the maximum {MEMO_DEPTH_MAX}"
            )));
        }
        Ok(Ope {
            mac: HmacKey::new(key),
            in_lo: in_range.0,
            in_hi: in_range.1,
            out_lo: out_range.0,
            out_hi: out_range.1,
            memo_depth,
            memo: HashMap::default(),
            half_ln_2pi: half_ln_2pi(),
        })
    }

    /// Number of remembered tree nodes.
    pub fn memo_len(&self) -> usize {
        self.memo.len()
    }

    /// Forget every remembered node (the memo is as sensitive as the key).
    pub fn clear(&mut self) {
        self.memo = HashMap::default();
    }

    fn root(&self) -> Node {
        Node {
            dlo: self.in_lo,
            dhi: self.in_hi,
            rlo: self.out_lo,
            rhi: self.out_hi,
            path: 1,
            depth: 0,
        }
    }

    fn tape(&self, seed: i128) -> Tape {
        let mut buf = [0u8; 48];
        Tape::new(&self.mac.mac(decimal(seed, &mut buf)))
    }

    /// The first `len` keystream bytes of `tape_gen(seed)` (for the tape test vectors).
    pub fn keystream(&self, seed: i128, len: usize) -> Vec<u8> {
        let mut tape = self.tape(seed);
        (0..len)
            .map(|_| (0..8).fold(0u8, |byte, _| byte << 1 | tape.next_bit() as u8))
            .collect()
    }

    /// The leaf's ciphertext: a binary search over [rlo, rhi] steered by the plaintext's coins.
    fn leaf(&self, plaintext: i128, mut rlo: i128, mut rhi: i128) -> i128 {
        if rlo == rhi {
            return rlo; // no coin is consumed, so no HMAC or AES work is needed
        }
        let mut tape = self.tape(plaintext);
        while rlo < rhi {
            // PYOPE 0.2.2: floor division on integers (0.2.0/0.2.1 used a float here).
            let mid = (rlo + rhi) >> 1;
            if tape.next_bit() {
                rlo = mid + 1;
            } else {
                rhi = mid;
            }
        }
        rlo
    }

    /// Midpoint y of a node's range and the node's split x (from the memo when shallow).
    fn split(&mut self, node: &Node) -> Result<(i128, i128), OpeError> {
        let n = node.rhi - node.rlo + 1;
        // PYOPE: `ceil(N / 2.0)` in floating point, inexact once N exceeds 2^53.
        let y = node.rlo - 1 + half_up(n);
        let memoised = node.depth < self.memo_depth;
        if memoised {
            if let Some(&x) = self.memo.get(&node.path) {
                return Ok((y, x));
            }
        }
        let m = node.dhi - node.dlo + 1;
        let mut tape = self.tape(y);
        let num = rhyper(&mut tape, y - node.rlo + 1, m, n - m, self.half_ln_2pi)?;
        // PYOPE: a draw of zero still leaves one plaintext on the left.
        let x = node.dlo + num.max(1) - 1;
        if memoised {
            self.memo.insert(node.path, x);
        }
        Ok((y, x))
    }

    /// The split at the root: (midpoint y, split x) (for the node test vectors).
    pub fn root_split(&mut self) -> Result<(i128, i128), OpeError> {
        let root = self.root();
        if root.dhi - root.dlo == root.rhi - root.rlo {
            let y = root.rlo - 1 + half_up(root.rhi - root.rlo + 1);
            return Ok((y, root.dlo + (y - root.rlo)));
        }
        self.split(&root)
    }

    fn check_plaintext(&self, p: i128) -> Result<(), OpeError> {
        if p < self.in_lo || p > self.in_hi {
            return Err(OpeError::OutOfRange(format!(
                "plaintext {p} is not within the input range [{}, {}]",
                self.in_lo, self.in_hi
            )));
        }
        Ok(())
    }

    fn check_ciphertext(&self, c: i128) -> Result<(), OpeError> {
        if c < self.out_lo || c > self.out_hi {
            return Err(OpeError::OutOfRange(format!(
                "ciphertext {c} is not within the output range [{}, {}]",
                self.out_lo, self.out_hi
            )));
        }
        Ok(())
    }

    pub fn encrypt(&mut self, p: i128) -> Result<i128, OpeError> {
        self.check_plaintext(p)?;
        let mut node = self.root();
        loop {
            // A dense node (as many plaintexts as ciphertexts) maps by offset all the way down:
            // pyope's sampler returns the identity there without drawing coins.
            if node.dhi - node.dlo == node.rhi - node.rlo {
                return Ok(node.rlo + (p - node.dlo));
            }
            if node.dlo == node.dhi {
                return Ok(self.leaf(p, node.rlo, node.rhi));
            }
            let (y, x) = self.split(&node)?;
            node = if p <= x {
                node.left(x, y)
            } else {
                node.right(x, y)
            };
        }
    }

    pub fn decrypt(&mut self, c: i128) -> Result<i128, OpeError> {
        self.check_ciphertext(c)?;
        let mut node = self.root();
        loop {
            if node.dhi - node.dlo == node.rhi - node.rlo {
                return Ok(node.dlo + (c - node.rlo));
            }
            if node.dlo == node.dhi {
                // Check the leaf by encrypting its only plaintext again.
                return if self.leaf(node.dlo, node.rlo, node.rhi) == c {
                    Ok(node.dlo)
                } else {
                    Err(OpeError::InvalidCiphertext)
                };
            }
            let (y, x) = self.split(&node)?;
            node = if c <= y {
                node.left(x, y)
            } else if x == node.dhi {
                // The right child has no plaintext (pyope: an inverted ValueRange).
                return Err(OpeError::InvalidCiphertext);
            } else {
                node.right(x, y)
            };
        }
    }

    /// Encrypt sorted, distinct plaintexts by one depth-first walk: each node on the union of
    /// their paths is computed once per batch, memo or not.
    pub fn encrypt_sorted(&mut self, ps: &[i128]) -> Result<Vec<i128>, OpeError> {
        if let (Some(&first), Some(&last)) = (ps.first(), ps.last()) {
            self.check_plaintext(first)?;
            self.check_plaintext(last)?;
        }
        let mut out = Vec::with_capacity(ps.len());
        self.encrypt_walk(self.root(), ps, &mut out)?;
        Ok(out)
    }

    fn encrypt_walk(
        &mut self,
        node: Node,
        ps: &[i128],
        out: &mut Vec<i128>,
    ) -> Result<(), OpeError> {
        if ps.is_empty() {
            return Ok(());
        }
        if node.dhi - node.dlo == node.rhi - node.rlo {
            out.extend(ps.iter().map(|&p| node.rlo + (p - node.dlo)));
            return Ok(());
        }
        if node.dlo == node.dhi {
            out.push(self.leaf(ps[0], node.rlo, node.rhi));
            return Ok(());
        }
        let (y, x) = self.split(&node)?;
        let cut = ps.partition_point(|&p| p <= x);
        self.encrypt_walk(node.left(x, y), &ps[..cut], out)?;
        self.encrypt_walk(node.right(x, y), &ps[cut..], out)
    }

    /// Decrypt sorted, distinct ciphertexts by one walk; fails on the first invalid one.
    pub fn decrypt_sorted(&mut self, cs: &[i128]) -> Result<Vec<i128>, OpeError> {
        if let (Some(&first), Some(&last)) = (cs.first(), cs.last()) {
            self.check_ciphertext(first)?;
            self.check_ciphertext(last)?;
        }
        let mut out = Vec::with_capacity(cs.len());
        self.decrypt_walk(self.root(), cs, &mut out)?;
        Ok(out)
    }

    fn decrypt_walk(
        &mut self,
        node: Node,
        cs: &[i128],
        out: &mut Vec<i128>,
    ) -> Result<(), OpeError> {
        if cs.is_empty() {
            return Ok(());
        }
        if node.dhi - node.dlo == node.rhi - node.rlo {
            out.extend(cs.iter().map(|&c| node.dlo + (c - node.rlo)));
            return Ok(());
        }
        if node.dlo == node.dhi {
            let only = self.leaf(node.dlo, node.rlo, node.rhi);
            if cs.len() > 1 || cs[0] != only {
                return Err(OpeError::InvalidCiphertext);
            }
            out.push(node.dlo);
            return Ok(());
        }
        let (y, x) = self.split(&node)?;
        let cut = cs.partition_point(|&c| c <= y);
        if cut < cs.len() && x == node.dhi {
            return Err(OpeError::InvalidCiphertext);
        }
        self.decrypt_walk(node.left(x, y), &cs[..cut], out)?;
        if cut < cs.len() {
            self.decrypt_walk(node.right(x, y), &cs[cut..], out)?;
        }
        Ok(())
    }
}

/// Sort and deduplicate `values`, run `f` on the distinct ones, and return its results in the
/// order (and multiplicity) of `values`.
pub fn batched<F>(values: &[i128], f: F) -> Result<Vec<i128>, OpeError>
where
    F: FnOnce(&[i128]) -> Result<Vec<i128>, OpeError>,
{
    let mut distinct = values.to_vec();
    distinct.sort_unstable();
    distinct.dedup();
    let results = f(&distinct)?;
    Ok(values
        .iter()
        .map(|v| {
            results[distinct
                .binary_search(v)
                .expect("value is in its own batch")]
        })
        .collect())
}

#[cfg(test)]
mod tests {
    use super::*;

    const KEY1: &[u8] = b"esdash-test-vector-key-000000001";

    #[test]
    fn tape_vector() {
        let ope = Ope::new(KEY1, (0, 1), (0, 1), 0).unwrap();
        let expected = "a3246786d648edb759fcaa738362b85dbf77ca9df388ced3b156dc5127b3fc6d";
        let got: String = ope
            .keystream(0, 32)
            .iter()
            .map(|b| format!("{b:02x}"))
            .collect();
        assert_eq!(got, expected);
    }

    #[test]
    fn pyope_defaults() {
        let mut ope = Ope::new(KEY1, (0, 32767), (0, 2147483647), 16).unwrap();
        for (p, c) in [
            (0, 41764),
            (7733, 505982368),
            (29848, 1953215458),
            (32767, 2147458892),
        ] {
            assert_eq!(ope.encrypt(p).unwrap(), c);
            assert_eq!(ope.decrypt(c).unwrap(), p);
        }
        assert_eq!(ope.root_split().unwrap(), (1073741823, 16427));
    }

    #[test]
    fn batch_matches_single() {
        let mut ope = Ope::new(KEY1, (-50, 200), (-1000, 1_000_000), 4).unwrap();
        let values: Vec<i128> = (-50..=200).rev().step_by(3).collect();
        let batch = batched(&values, |v| ope.encrypt_sorted(v)).unwrap();
        ope.clear();
        for (v, c) in values.iter().zip(&batch) {
            assert_eq!(ope.encrypt(*v).unwrap(), *c);
            assert_eq!(ope.decrypt(*c).unwrap(), *v);
        }
        assert_eq!(batched(&batch, |v| ope.decrypt_sorted(v)).unwrap(), values);
    }

    #[test]
    fn fast_conversions_match_std() {
        let doubles = [
            -2.5,
            -1.0,
            -0.7,
            -0.0,
            0.0,
            0.3,
            1.0,
            2.5,
            4503599627370495.5,
            -1e300,
            1e20,
        ];
        for v in doubles {
            assert_eq!(floor(v).to_bits(), v.floor().to_bits(), "{v}");
        }
        for n in [
            1i128,
            2,
            3,
            (1 << 53) - 1,
            1 << 53,
            (1 << 53) + 1,
            (1 << 64) - 1,
            1 << 64,
        ] {
            assert_eq!(half_up(n), (n as f64 / 2.0).ceil() as i128, "{n}");
        }
        for v in [
            0i128,
            -1,
            i64::MAX as i128 + 1,
            -(1 << 70) - 1,
            (1 << 100) + 12345,
        ] {
            assert_eq!(to_f64(v).to_bits(), (v as f64).to_bits());
        }
    }

    #[test]
    fn hmac_matches_rfc4231() {
        // RFC 4231 test case 2 (key "Jefe") and a key longer than one block.
        let mac = HmacKey::new(b"Jefe").mac(b"what do ya want for nothing?");
        let hex: String = mac.iter().map(|b| format!("{b:02x}")).collect();
        assert_eq!(
            hex,
            "5bdcc146bf60754e6a042426089575c75a003f089d2739839dec58b964ec3843"
        );
        let long = HmacKey::new(&[0xaa; 131])
            .mac(b"Test Using Larger Than Block-Size Key - Hash Key First");
        let hex: String = long.iter().map(|b| format!("{b:02x}")).collect();
        assert_eq!(
            hex,
            "60e431591ee0b67f0d8a26aacbf5b77f8e0bc6213728c5140546040f0ee37f54"
        );
    }

    #[test]
    fn decimal_seeds() {
        let mut buf = [0u8; 48];
        assert_eq!(decimal(0, &mut buf), b"0");
        assert_eq!(decimal(-1234, &mut buf), b"-1234");
        assert_eq!(decimal(VALUE_MAX, &mut buf), b"18446744073709551615");
        assert_eq!(
            decimal(i128::MIN, &mut buf),
            b"-170141183460469231731687303715884105728"
        );
    }
}
