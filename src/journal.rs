//! Append-only JSON-lines result files shared by `qrmem eval` (results.jsonl) and `qrmem batch`
//! (answers.jsonl): each record is one line written with one `write` on an `O_APPEND` file and
//! synced, so a finished result is on disk before the next starts.
//!
//! Invariants: reopening a journal after a crash (even `kill -9` in the middle of a write)
//! drops only the torn last line, which belonged to a result that had not finished; every
//! complete line is a record; nothing is written twice because callers skip the keys that
//! [`Journal::open`] returns.

use std::fs::{File, OpenOptions};
use std::io::Write;
use std::path::{Path, PathBuf};
use std::sync::Mutex;

use serde::de::DeserializeOwned;
use serde::Serialize;
use thiserror::Error;

#[derive(Debug, Error)]
pub enum JournalError {
    #[error("cannot use the results file {path}: {message}")]
    Io { path: String, message: String },
    #[error("the results file {path}, line {line}, is not a record of this program ({message}); move it away or use another output path")]
    Foreign {
        path: String,
        line: usize,
        message: String,
    },
}

/// An open journal.
pub struct Journal {
    path: PathBuf,
    file: Mutex<File>,
}

impl Journal {
    /// Opens (or creates) `path`, repairs a torn last line, and returns the records already in
    /// it. Records for which `keep` is false are removed (the file is rewritten atomically):
    /// that is how a re-run retries failures.
    pub fn open<T: DeserializeOwned + Serialize>(
        path: &Path,
        keep: impl Fn(&T) -> bool,
    ) -> Result<(Journal, Vec<T>), JournalError> {
        let io = |message: String| JournalError::Io {
            path: path.display().to_string(),
            message,
        };
        if let Some(dir) = path.parent().filter(|d| !d.as_os_str().is_empty()) {
            std::fs::create_dir_all(dir)
                .map_err(|e| io(format!("cannot create {}: {e}", dir.display())))?;
        }
        let bytes = match std::fs::read(path) {
            Ok(b) => b,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => Vec::new(),
            Err(e) => return Err(io(e.to_string())),
        };
        // Everything after the last newline is a line torn by a crash mid-write.
        let complete = match bytes.iter().rposition(|&b| b == b'\n') {
            Some(i) => i + 1,
            None => 0,
        };
        let torn = complete < bytes.len();
        let text = std::str::from_utf8(&bytes[..complete]).map_err(|e| JournalError::Foreign {
            path: path.display().to_string(),
            line: 1 + bytes[..e.valid_up_to()]
                .iter()
                .filter(|&&b| b == b'\n')
                .count(),
            message: "not UTF-8".into(),
        })?;
        let mut records = Vec::new();
        let mut dropped = 0usize;
        for (i, line) in text.lines().enumerate() {
            if line.trim().is_empty() {
                continue;
            }
            let record: T = serde_json::from_str(line).map_err(|e| JournalError::Foreign {
                path: path.display().to_string(),
                line: i + 1,
                message: e.to_string(),
            })?;
            if keep(&record) {
                records.push(record);
            } else {
                dropped += 1;
            }
        }
        if torn || dropped > 0 {
            if torn {
                tracing::warn!(
                    "{}: dropped a torn last line ({} bytes) left by an interrupted run",
                    path.display(),
                    bytes.len() - complete
                );
            }
            let mut out = Vec::with_capacity(complete);
            for r in &records {
                let line = serde_json::to_string(r).map_err(|e| io(e.to_string()))?;
                out.extend_from_slice(line.as_bytes());
                out.push(b'\n');
            }
            let dir = path
                .parent()
                .filter(|d| !d.as_os_str().is_empty())
                .unwrap_or(Path::new("."));
            let mut tmp = tempfile::NamedTempFile::new_in(dir).map_err(|e| io(e.to_string()))?;
            tmp.write_all(&out).map_err(|e| io(e.to_string()))?;
            crate::fsutil::readable_by_all(tmp.as_file());
            tmp.as_file().sync_all().map_err(|e| io(e.to_string()))?;
            tmp.persist(path).map_err(|e| io(e.error.to_string()))?;
        }
        let file = OpenOptions::new()
            .create(true)
            .append(true)
            .open(path)
            .map_err(|e| io(e.to_string()))?;
        Ok((
            Journal {
                path: path.to_path_buf(),
                file: Mutex::new(file),
            },
            records,
        ))
    }

    pub fn path(&self) -> &Path {
        &self.path
    }

    /// Appends one record as one line and syncs it.
    pub fn append<T: Serialize>(&self, record: &T) -> Result<(), JournalError> {
        let io = |message: String| JournalError::Io {
            path: self.path.display().to_string(),
            message,
        };
        let mut line = serde_json::to_vec(record).map_err(|e| io(e.to_string()))?;
        line.push(b'\n');
        let mut file = self.file.lock().unwrap_or_else(|p| p.into_inner());
        file.write_all(&line).map_err(|e| io(e.to_string()))?;
        file.sync_data().map_err(|e| io(e.to_string()))?;
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde::Deserialize;

    #[derive(Debug, PartialEq, Serialize, Deserialize)]
    struct R {
        k: u32,
        ok: bool,
    }

    #[test]
    fn appends_resumes_repairs_and_filters() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("sub/results.jsonl");
        let (j, old) = Journal::open::<R>(&path, |_| true).unwrap();
        assert!(old.is_empty());
        for k in 0..3 {
            j.append(&R { k, ok: k != 1 }).unwrap();
        }
        drop(j);
        // A crash in the middle of the fourth line.
        let mut f = OpenOptions::new().append(true).open(&path).unwrap();
        f.write_all(b"{\"k\":3,\"o").unwrap();
        drop(f);
        let (j, old) = Journal::open::<R>(&path, |_| true).unwrap();
        assert_eq!(old.len(), 3);
        j.append(&R { k: 3, ok: true }).unwrap();
        drop(j);
        let text = std::fs::read_to_string(&path).unwrap();
        assert_eq!(text.lines().count(), 4, "{text}");
        // Retrying failures drops them from the file.
        let (_j, old) = Journal::open::<R>(&path, |r| r.ok).unwrap();
        assert_eq!(old.iter().map(|r| r.k).collect::<Vec<_>>(), vec![0, 2, 3]);
        assert_eq!(std::fs::read_to_string(&path).unwrap().lines().count(), 3);
    }

    #[test]
    fn foreign_files_are_refused_with_the_line() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("x.jsonl");
        std::fs::write(&path, "{\"k\":1,\"ok\":true}\n[1,2,3]\n").unwrap();
        let err = Journal::open::<R>(&path, |_| true)
            .err()
            .unwrap()
            .to_string();
        assert!(err.contains("line 2") && err.contains("x.jsonl"), "{err}");
    }
}
