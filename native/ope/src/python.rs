//! PyO3 binding: an `Engine` per (key, in range, out range) context.
//!
//! esdash's `OpeCipher` wraps it (argument checks, pyope-style errors, LRU caches); this layer
//! only converts integers and errors.  Integers cross as `i64` or `u64` (both fast in the
//! limited API, unlike `i128`); the native limits are exactly that union.

use std::sync::Mutex;

use pyo3::exceptions::{PyOverflowError, PyValueError, PyZeroDivisionError};
use pyo3::prelude::*;
use pyo3::types::PyBytes;

use crate::core::{batched, Ope, OpeError, MEMO_DEPTH_MAX, VALUE_MAX, VALUE_MIN};

fn to_py_err(err: OpeError) -> PyErr {
    match err {
        OpeError::ZeroDraw => PyZeroDivisionError::new_err(err.to_string()),
        OpeError::Overflow => PyOverflowError::new_err(err.to_string()),
        _ => PyValueError::new_err(err.to_string()),
    }
}

/// A Python int as `i128`, if it lies in [-2^63, 2^64 - 1].
fn int_arg(value: &Bound<'_, PyAny>) -> PyResult<i128> {
    if let Ok(v) = value.extract::<i64>() {
        return Ok(v as i128);
    }
    if let Ok(v) = value.extract::<u64>() {
        return Ok(v as i128);
    }
    Err(PyValueError::new_err(format!(
        "{value} is outside the native backend's limits [-2^63, 2^64-1] or not an int"
    )))
}

fn int_result(py: Python<'_>, value: i128) -> PyResult<Py<PyAny>> {
    if let Ok(v) = i64::try_from(value) {
        return Ok(v.into_pyobject(py)?.into_any().unbind());
    }
    let v = u64::try_from(value).map_err(|_| PyOverflowError::new_err("result out of range"))?;
    Ok(v.into_pyobject(py)?.into_any().unbind())
}

fn int_args(values: &Bound<'_, PyAny>) -> PyResult<Vec<i128>> {
    let mut out = Vec::new();
    for value in values.try_iter()? {
        out.push(int_arg(&value?)?);
    }
    Ok(out)
}

fn int_results(py: Python<'_>, values: Vec<i128>) -> PyResult<Vec<Py<PyAny>>> {
    values.into_iter().map(|v| int_result(py, v)).collect()
}

/// One OPE context with its node memo.  Thread-safe: the batch calls release the GIL, so
/// several contexts (fields) can be encrypted in parallel.
#[pyclass(frozen, module = "esdash_ope_native")]
struct Engine {
    ope: Mutex<Ope>,
}

impl Engine {
    fn lock(&self) -> std::sync::MutexGuard<'_, Ope> {
        // A panic cannot leave the memo inconsistent (entries are inserted whole).
        self.ope
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
    }
}

#[pymethods]
impl Engine {
    #[new]
    #[pyo3(signature = (key, in_range, out_range, memo_depth = 16))]
    fn new(
        key: &[u8],
        in_range: (Bound<'_, PyAny>, Bound<'_, PyAny>),
        out_range: (Bound<'_, PyAny>, Bound<'_, PyAny>),
        memo_depth: u32,
    ) -> PyResult<Engine> {
        let in_range = (int_arg(&in_range.0)?, int_arg(&in_range.1)?);
        let out_range = (int_arg(&out_range.0)?, int_arg(&out_range.1)?);
        let ope = Ope::new(key, in_range, out_range, memo_depth).map_err(to_py_err)?;
        Ok(Engine {
            ope: Mutex::new(ope),
        })
    }

    fn encrypt(&self, py: Python<'_>, plaintext: &Bound<'_, PyAny>) -> PyResult<Py<PyAny>> {
        let p = int_arg(plaintext)?;
        let c = self.lock().encrypt(p).map_err(to_py_err)?;
        int_result(py, c)
    }

    fn decrypt(&self, py: Python<'_>, ciphertext: &Bound<'_, PyAny>) -> PyResult<Py<PyAny>> {
        let c = int_arg(ciphertext)?;
        let p = self.lock().decrypt(c).map_err(to_py_err)?;
        int_result(py, p)
    }

    /// Ciphertexts of `plaintexts` (any order, repeats allowed), in input order.
    fn encrypt_many(
        &self,
        py: Python<'_>,
        plaintexts: &Bound<'_, PyAny>,
    ) -> PyResult<Vec<Py<PyAny>>> {
        let values = int_args(plaintexts)?;
        let out = py
            .detach(|| batched(&values, |v| self.lock().encrypt_sorted(v)))
            .map_err(to_py_err)?;
        int_results(py, out)
    }

    /// Plaintexts of `ciphertexts` (any order, repeats allowed), in input order.
    fn decrypt_many(
        &self,
        py: Python<'_>,
        ciphertexts: &Bound<'_, PyAny>,
    ) -> PyResult<Vec<Py<PyAny>>> {
        let values = int_args(ciphertexts)?;
        let out = py
            .detach(|| batched(&values, |v| self.lock().decrypt_sorted(v)))
            .map_err(to_py_err)?;
        int_results(py, out)
    }

    /// (midpoint y, split x) of the root node, for the node test vectors.
    fn root_split(&self, py: Python<'_>) -> PyResult<(Py<PyAny>, Py<PyAny>)> {
        let (y, x) = self.lock().root_split().map_err(to_py_err)?;
        Ok((int_result(py, y)?, int_result(py, x)?))
    }

    /// The first `length` bytes of the coin tape for `seed`, for the tape test vectors.
    fn keystream<'py>(
        &self,
        py: Python<'py>,
        seed: &Bound<'py, PyAny>,
        length: usize,
    ) -> PyResult<Bound<'py, PyBytes>> {
        let seed = int_arg(seed)?;
        Ok(PyBytes::new(py, &self.lock().keystream(seed, length)))
    }

    fn memo_len(&self) -> usize {
        self.lock().memo_len()
    }

    fn clear(&self) {
        self.lock().clear();
    }

    fn __repr__(&self) -> String {
        // Never the key.
        "<esdash_ope_native.Engine>".to_string()
    }
}

#[pymodule]
fn esdash_ope_native(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add_class::<Engine>()?;
    m.add("VALUE_MIN", VALUE_MIN as i64)?;
    m.add("VALUE_MAX", VALUE_MAX as u64)?;
    m.add("MEMO_DEPTH_MAX", MEMO_DEPTH_MAX)?;
    Ok(())
}
