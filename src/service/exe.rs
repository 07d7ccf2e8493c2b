//! Putting the gsv executable where the service runs it from.
//!
//! `gsv node install --bin-dir DIR` copies the running executable to `DIR/gsv`, unless
//! that file already has the same bytes: written beside it under a temporary name,
//! synced and renamed over it, so a node running the old file keeps running it and
//! the next start gets the new one whole.

use super::ServiceError;
use std::io::Read;
use std::path::{Path, PathBuf};

/// What happened to the executable.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ExeChange {
    /// `DIR/gsv` was missing and is now this executable.
    Installed,
    /// `DIR/gsv` was another build and is now this one.
    Replaced,
    /// `DIR/gsv` is this executable already.
    Unchanged,
}

/// The running executable, to read from. On Linux `/proc/self/exe`, which opens the
/// program that runs even when its file was renamed or replaced meanwhile.
fn own_exe() -> Result<PathBuf, ServiceError> {
    if cfg!(target_os = "linux") {
        return Ok(PathBuf::from("/proc/self/exe"));
    }
    std::env::current_exe().map_err(ServiceError::io("find", Path::new("this executable")))
}

/// Copies the running executable to `dir/gsv` unless it is the same already.
pub fn install(dir: &Path) -> Result<(PathBuf, ExeChange), ServiceError> {
    let target = super::argv::absolute(&dir.join("gsv"))?;
    let from = own_exe()?;
    let existed = target.exists();
    if existed && same_contents(&from, &target)? {
        return Ok((target, ExeChange::Unchanged));
    }
    std::fs::create_dir_all(dir).map_err(ServiceError::io("create", dir))?;
    let tmp = dir.join(format!(".gsv.new.{}", std::process::id()));
    let copied = std::fs::copy(&from, &tmp)
        .map_err(ServiceError::io("write", &tmp))
        .and_then(|_| set_mode(&tmp, 0o755))
        .and_then(|_| {
            std::fs::File::open(&tmp)
                .and_then(|f| f.sync_all())
                .map_err(ServiceError::io("sync", &tmp))
        })
        .and_then(|_| std::fs::rename(&tmp, &target).map_err(ServiceError::io("replace", &target)));
    if let Err(e) = copied {
        let _ = std::fs::remove_file(&tmp);
        return Err(e);
    }
    Ok((
        target,
        if existed {
            ExeChange::Replaced
        } else {
            ExeChange::Installed
        },
    ))
}

fn set_mode(path: &Path, mode: u32) -> Result<(), ServiceError> {
    #[cfg(unix)]
    {
        use std::os::unix::fs::PermissionsExt;
        std::fs::set_permissions(path, std::fs::Permissions::from_mode(mode))
            .map_err(ServiceError::io("chmod", path))?;
    }
    #[cfg(not(unix))]
    let _ = (path, mode);
    Ok(())
}

/// Whether two files have the same bytes.
fn same_contents(a: &Path, b: &Path) -> Result<bool, ServiceError> {
    let open = |p: &Path| std::fs::File::open(p).map_err(ServiceError::io("read", p));
    let (mut fa, mut fb) = (open(a)?, open(b)?);
    let len = |f: &std::fs::File, p: &Path| {
        f.metadata()
            .map(|m| m.len())
            .map_err(ServiceError::io("read", p))
    };
    if len(&fa, a)? != len(&fb, b)? {
        return Ok(false);
    }
    let (mut ba, mut bb) = (vec![0u8; 1 << 16], vec![0u8; 1 << 16]);
    loop {
        let n = read_full(&mut fa, &mut ba).map_err(ServiceError::io("read", a))?;
        let m = read_full(&mut fb, &mut bb).map_err(ServiceError::io("read", b))?;
        if n != m || ba[..n] != bb[..m] {
            return Ok(false);
        }
        if n == 0 {
            return Ok(true);
        }
    }
}

/// Reads until `buf` is full or the file ends.
fn read_full(f: &mut std::fs::File, buf: &mut [u8]) -> std::io::Result<usize> {
    let mut filled = 0;
    while filled < buf.len() {
        match f.read(&mut buf[filled..])? {
            0 => break,
            n => filled += n,
        }
    }
    Ok(filled)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn copies_once_then_leaves_it() {
        let dir = std::env::temp_dir().join(format!("gsv-exe-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        let (path, change) = install(&dir).unwrap();
        assert_eq!(change, ExeChange::Installed);
        assert_eq!(path, dir.join("gsv"));
        #[cfg(unix)]
        {
            use std::os::unix::fs::PermissionsExt;
            let mode = std::fs::metadata(&path).unwrap().permissions().mode();
            assert_eq!(mode & 0o777, 0o755);
        }
        assert_eq!(install(&dir).unwrap().1, ExeChange::Unchanged);
        std::fs::write(&path, b"an older build").unwrap();
        assert_eq!(install(&dir).unwrap().1, ExeChange::Replaced);
        assert!(same_contents(&own_exe().unwrap(), &path).unwrap());
        let leftovers: Vec<_> = std::fs::read_dir(&dir).unwrap().collect();
        assert_eq!(leftovers.len(), 1, "no temporary file left");
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
