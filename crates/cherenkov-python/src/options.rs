//! The keywords of opening a file, parsed by the core's one table of options
//! (`engine::options::OPEN_OPTIONS`): `cherenkov.open`, uproot's handler, fsspec and Dask all pass
//! the same names to `RootFile.open` / `RawSource.open`.

use cherenkov_core::engine::options::{OpenOptions, OptionKind, OptionValue, OPEN_OPTIONS};
use pyo3::exceptions::{PyTypeError, PyValueError};
use pyo3::prelude::*;
use pyo3::types::PyDict;

/// The options given as keywords, checked; a value of None means the default.
pub fn open_options(given: Option<&Bound<'_, PyDict>>) -> PyResult<OpenOptions> {
    let mut options = OpenOptions::default();
    for (key, value) in given.into_iter().flat_map(|d| d.iter()) {
        let name: String = key.extract()?;
        let Some(option) = OPEN_OPTIONS.iter().find(|o| o.name == name) else {
            let names: Vec<&str> = OPEN_OPTIONS.iter().map(|o| o.name).collect();
            return Err(PyTypeError::new_err(format!(
                "open() got an unexpected option '{name}' (options: {})",
                names.join(", ")
            )));
        };
        if value.is_none() {
            continue;
        }
        let typed = |e: PyErr| PyTypeError::new_err(format!("option {name}: {e}"));
        let value = match option.kind {
            OptionKind::Bool => OptionValue::Bool(value.extract().map_err(typed)?),
            OptionKind::Text => OptionValue::Text(value.extract().map_err(typed)?),
            OptionKind::Path => {
                let path = PyModule::import(value.py(), "os")?.call_method1("fspath", (value,));
                OptionValue::Text(path.and_then(|p| p.extract()).map_err(typed)?)
            }
            _ if value.is_instance_of::<pyo3::types::PyBool>() => {
                return Err(PyTypeError::new_err(format!(
                    "option {name}: a number, not {value}"
                )))
            }
            _ => OptionValue::Number(value.extract().map_err(typed)?),
        };
        options
            .set(&name, value)
            .map_err(|e| PyValueError::new_err(e.to_string()))?;
    }
    Ok(options.finish())
}

/// The table of options, for Python: `(name, default, doc)` in the order documented.
pub fn described() -> Vec<(&'static str, &'static str, &'static str)> {
    OPEN_OPTIONS
        .iter()
        .map(|o| (o.name, o.default, o.doc))
        .collect()
}
