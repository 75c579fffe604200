//! `esdash_ope_native`: the native backend of `esdash_plugins.encryption.abe.ope`.
//!
//! [`core`] is the cipher in plain Rust; the `python` module is a thin PyO3 (abi3) binding.
//! esdash imports this module lazily and falls back to its pure-Python backend when it is
//! missing, so nothing in esdash requires a Rust toolchain.

pub mod core;

#[cfg(feature = "python")]
mod python;
