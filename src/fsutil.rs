//! Small file-system helpers shared by the writers.

/// Temporary files are created 0600; a file renamed into place from one should have the usual
/// 0644, like any file the user writes.
pub(crate) fn readable_by_all(file: &std::fs::File) {
    #[cfg(unix)]
    {
        use std::os::unix::fs::PermissionsExt;
        if let Err(e) = file.set_permissions(std::fs::Permissions::from_mode(0o644)) {
            tracing::debug!("cannot set permissions: {e}");
        }
    }
    #[cfg(not(unix))]
    let _ = file;
}

/// The bytes of `path`, gunzipped when the file is gzip (its first two bytes are gzip's magic
/// number): memory files may be stored compressed (`*.qrm.gz`), and every reader takes both.
pub(crate) fn read_maybe_gz(path: &std::path::Path) -> std::io::Result<Vec<u8>> {
    gunzip_if_gz(std::fs::read(path)?)
}

/// `bytes` gunzipped when they start with gzip's magic number, unchanged otherwise.
pub(crate) fn gunzip_if_gz(bytes: Vec<u8>) -> std::io::Result<Vec<u8>> {
    use std::io::Read;
    if bytes.starts_with(&[0x1f, 0x8b]) {
        let mut out = Vec::with_capacity(bytes.len() * 8);
        flate2::read::GzDecoder::new(bytes.as_slice()).read_to_end(&mut out)?;
        Ok(out)
    } else {
        Ok(bytes)
    }
}

/// `bytes` gzipped when `path` ends in `.gz`, unchanged otherwise.
pub(crate) fn maybe_gz(path: &std::path::Path, bytes: Vec<u8>) -> std::io::Result<Vec<u8>> {
    use std::io::Write;
    if path.extension().is_some_and(|e| e == "gz") {
        let mut enc = flate2::write::GzEncoder::new(
            Vec::with_capacity(bytes.len() / 6),
            flate2::Compression::default(),
        );
        enc.write_all(&bytes)?;
        enc.finish()
    } else {
        Ok(bytes)
    }
}

/// Writes `bytes` to `path` whole or not at all: a temporary file in the same directory,
/// fsynced, made 0644, then renamed over `path`. Creates the directory. Errors name the path.
pub(crate) fn write_atomic(path: &std::path::Path, bytes: &[u8]) -> Result<(), String> {
    use std::io::Write;
    let dir = path
        .parent()
        .filter(|p| !p.as_os_str().is_empty())
        .unwrap_or(std::path::Path::new("."));
    std::fs::create_dir_all(dir).map_err(|e| format!("cannot create {}: {e}", dir.display()))?;
    let fail = |e: &dyn std::fmt::Display| format!("cannot write {}: {e}", path.display());
    let mut tmp = tempfile::NamedTempFile::new_in(dir).map_err(|e| fail(&e))?;
    tmp.write_all(bytes).map_err(|e| fail(&e))?;
    readable_by_all(tmp.as_file());
    tmp.as_file().sync_all().map_err(|e| fail(&e))?;
    tmp.persist(path).map_err(|e| fail(&e.error))?;
    Ok(())
}

/// Reads a JSON file written by this program, checking its `format` and `version` fields before
/// the rest, so a truncated file, another version (both versions named) or another program's
/// JSON is named as such.
/// `what` names the kind of file in the error ("knowledge tree").
pub(crate) fn read_versioned<T: serde::de::DeserializeOwned>(
    path: &std::path::Path,
    format: &str,
    version: u32,
    what: &str,
) -> Result<T, String> {
    let bytes = std::fs::read(path).map_err(|e| format!("cannot read {}: {e}", path.display()))?;
    let v: serde_json::Value = serde_json::from_slice(&bytes)
        .map_err(|e| format!("{} is corrupt or truncated ({e})", path.display()))?;
    if v.get("format").and_then(serde_json::Value::as_str) != Some(format) {
        return Err(format!(
            "{} is not a {what} (no \"format\": \"{format}\")",
            path.display()
        ));
    }
    let found = v.get("version").and_then(serde_json::Value::as_u64);
    if found != Some(u64::from(version)) {
        let found = found.map_or_else(|| "no version".to_string(), |n| format!("version {n}"));
        return Err(format!(
            "{} is a {what} of {found}, but this build reads version {version} (build it again)",
            path.display()
        ));
    }
    serde_json::from_value(v).map_err(|e| format!("{} is corrupt ({e})", path.display()))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[derive(serde::Serialize, serde::Deserialize, Debug, PartialEq)]
    struct Doc {
        format: String,
        version: u32,
        body: Vec<u32>,
    }

    #[test]
    fn written_files_read_back_and_bad_ones_are_named() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("sub").join("x.json");
        let doc = Doc {
            format: "f".into(),
            version: 2,
            body: vec![1, 2],
        };
        write_atomic(&path, &serde_json::to_vec(&doc).unwrap()).unwrap();
        assert_eq!(read_versioned::<Doc>(&path, "f", 2, "thing").unwrap(), doc);
        let e = read_versioned::<Doc>(&path, "f", 3, "thing").unwrap_err();
        assert!(
            e.contains("is a thing of version 2, but this build reads version 3"),
            "{e}"
        );
        let e = read_versioned::<Doc>(&path, "g", 2, "thing").unwrap_err();
        assert!(e.contains("is not a thing (no \"format\": \"g\")"), "{e}");
        std::fs::write(&path, br#"{"format":"f","version":2,"bo"#).unwrap();
        let e = read_versioned::<Doc>(&path, "f", 2, "thing").unwrap_err();
        assert!(e.contains("corrupt or truncated"), "{e}");
        let e = read_versioned::<Doc>(&dir.path().join("none"), "f", 2, "thing").unwrap_err();
        assert!(e.starts_with("cannot read"), "{e}");
    }
}
