//! The memory file: one versioned JSON document, written atomically (temporary file in the same
//! directory, fsync, rename), so a crash leaves the previous file intact. Loading checks the
//! format and version first and names the file and the problem when it cannot be used. A path
//! ending in `.gz` is written gzipped, and any memory file is read plain or gzipped.

use std::io::Write;
use std::path::Path;

use serde::Deserialize;
use thiserror::Error;

use super::types::{Memory, FORMAT, VERSION};

#[derive(Debug, Error)]
pub enum StoreError {
    #[error("cannot read the memory file {path}: {message}")]
    Read { path: String, message: String },
    #[error("cannot write the memory file {path}: {message}")]
    Write { path: String, message: String },
    #[error(
        "the memory file {path} is corrupt or truncated ({detail}); rebuild it with `qrmem build`"
    )]
    Corrupt { path: String, detail: String },
    #[error("{path} is not a qrmem memory file (it has no \"format\": \"{FORMAT}\" field)")]
    Foreign { path: String },
    #[error("the memory file {path} has format version {found}; this qrmem reads version {expected}; rebuild it with `qrmem build`")]
    Version {
        path: String,
        found: u32,
        expected: u32,
    },
}

#[derive(Deserialize)]
struct Header {
    format: Option<String>,
    version: Option<u32>,
}

/// Serialises the memory (compact JSON). Deterministic: the same memory gives the same bytes.
pub fn to_bytes(memory: &Memory) -> Result<Vec<u8>, serde_json::Error> {
    serde_json::to_vec(memory)
}

/// Writes the memory to `path`, gzipped when the path ends in `.gz` (the eval store's graphs).
pub fn save(memory: &Memory, path: &Path) -> Result<(), StoreError> {
    let err = |message: String| StoreError::Write {
        path: path.display().to_string(),
        message,
    };
    let bytes = to_bytes(memory).map_err(|e| err(e.to_string()))?;
    let bytes = crate::fsutil::maybe_gz(path, bytes).map_err(|e| err(e.to_string()))?;
    let dir = match path.parent() {
        Some(p) if !p.as_os_str().is_empty() => p.to_path_buf(),
        _ => std::path::PathBuf::from("."),
    };
    std::fs::create_dir_all(&dir)
        .map_err(|e| err(format!("cannot create {}: {e}", dir.display())))?;
    let mut tmp = tempfile::NamedTempFile::new_in(&dir).map_err(|e| err(e.to_string()))?;
    tmp.write_all(&bytes).map_err(|e| err(e.to_string()))?;
    crate::fsutil::readable_by_all(tmp.as_file());
    tmp.as_file().sync_all().map_err(|e| err(e.to_string()))?;
    tmp.persist(path).map_err(|e| err(e.error.to_string()))?;
    Ok(())
}

pub fn from_bytes(bytes: &[u8], path: &str) -> Result<Memory, StoreError> {
    let header: Header = serde_json::from_slice(bytes).map_err(|e| StoreError::Corrupt {
        path: path.to_string(),
        detail: describe(&e),
    })?;
    if header.format.as_deref() != Some(FORMAT) {
        return Err(StoreError::Foreign {
            path: path.to_string(),
        });
    }
    match header.version {
        Some(VERSION) => {}
        Some(found) => {
            return Err(StoreError::Version {
                path: path.to_string(),
                found,
                expected: VERSION,
            })
        }
        None => {
            return Err(StoreError::Corrupt {
                path: path.to_string(),
                detail: "no version field".into(),
            })
        }
    }
    serde_json::from_slice(bytes).map_err(|e| StoreError::Corrupt {
        path: path.to_string(),
        detail: describe(&e),
    })
}

/// Reads a memory file, plain or gzipped.
pub fn load(path: &Path) -> Result<Memory, StoreError> {
    let bytes = std::fs::read(path).map_err(|e| StoreError::Read {
        path: path.display().to_string(),
        message: e.to_string(),
    })?;
    let bytes = crate::fsutil::gunzip_if_gz(bytes).map_err(|e| StoreError::Corrupt {
        path: path.display().to_string(),
        detail: format!("its gzip stream is cut off or damaged: {e}"),
    })?;
    from_bytes(&bytes, &path.display().to_string())
}

fn describe(e: &serde_json::Error) -> String {
    match e.classify() {
        serde_json::error::Category::Eof => format!(
            "the JSON ends early at line {} column {}",
            e.line(),
            e.column()
        ),
        serde_json::error::Category::Syntax => format!(
            "invalid JSON at line {} column {}: {e}",
            e.line(),
            e.column()
        ),
        _ => e.to_string(),
    }
}
