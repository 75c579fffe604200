//! Cost of the cipher core without Python: µs per encryption with no memo, and per tape.
//!
//!     cargo run --release --no-default-features --example node_cost

use std::time::Instant;

use esdash_ope_native::core::Ope;

fn main() {
    let key = b"esdash node_cost example key 32b";
    let ranges = [
        ((0i128, 32767i128), (0i128, (1i128 << 31) - 1)),
        ((0, 100), (0, (1 << 48) - 1)),
        ((0, 30_000_000), (0, (1 << 48) - 1)),
        ((0, 30_000_000_000_000), (0, (1 << 63) - 1)),
    ];
    for (in_range, out_range) in ranges {
        let mut ope = Ope::new(key, in_range, out_range, 0).unwrap();
        let count = 20_000;
        let mut checksum = 0i128;
        let start = Instant::now();
        for i in 0..count {
            checksum ^= ope.encrypt(i * 7919 % (in_range.1 + 1)).unwrap();
        }
        let per_value = start.elapsed().as_secs_f64() / count as f64 * 1e6;
        println!("{in_range:?} -> {out_range:?}: {per_value:.2} us/value, no memo ({checksum:x})");
    }
    let ope = Ope::new(key, (0, 1), (0, 1), 0).unwrap();
    let start = Instant::now();
    let mut checksum = 0u8;
    for seed in 0..100_000 {
        checksum ^= ope.keystream(seed, 4)[0];
    }
    let per_tape = start.elapsed().as_secs_f64() / 100_000.0 * 1e6;
    println!("HMAC + AES key schedule + 1 block: {per_tape:.3} us ({checksum})");
}
