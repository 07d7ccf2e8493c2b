//! Files only the node's user may read, in a directory only that user may open.
//!
//! The node keeps its credential and its login-profile baseline in its data directory.
//! Both are written the same way: the directory is created 0700 if missing, the file
//! is written 0600 to a temporary name beside it, synced, and renamed over the old
//! one, so a crash never leaves half a file and no umask makes it readable to others.

use std::io::Write;
use std::path::Path;

/// Creates `dir` (and missing parents) readable by the node's user only (0700),
/// whatever the umask; an existing directory keeps its mode.
pub(crate) fn create_private_dir(dir: &Path) -> std::io::Result<()> {
    if dir.is_dir() {
        return Ok(());
    }
    #[cfg(unix)]
    {
        use std::os::unix::fs::DirBuilderExt;
        std::fs::DirBuilder::new()
            .recursive(true)
            .mode(0o700)
            .create(dir)
    }
    #[cfg(not(unix))]
    {
        std::fs::create_dir_all(dir)
    }
}

/// Replaces `path` with `content` (mode 0600), atomically: written to `<name>.tmp`
/// beside it, synced, then renamed.
pub(crate) fn write_private(path: &Path, content: &[u8]) -> std::io::Result<()> {
    if let Some(dir) = path.parent() {
        create_private_dir(dir)?;
    }
    let mut tmp_name = path.file_name().unwrap_or_default().to_owned();
    tmp_name.push(".tmp");
    let tmp = path.with_file_name(tmp_name);
    {
        let mut opts = std::fs::OpenOptions::new();
        opts.write(true).create(true).truncate(true);
        #[cfg(unix)]
        {
            use std::os::unix::fs::OpenOptionsExt;
            opts.mode(0o600);
        }
        let mut f = opts.open(&tmp)?;
        f.write_all(content)?;
        f.sync_all()?;
    }
    std::fs::rename(&tmp, path)
}
