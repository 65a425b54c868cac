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
