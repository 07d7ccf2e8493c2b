//! The gsv builds a gateway hands out to new machines, and their SHA-256.
//!
//! A build is named after the OS and CPU it runs on, as Rust spells them
//! (`linux-x86_64`, `linux-aarch64`, `macos-aarch64`, ...). The gateway always has one:
//! its own executable, for its own target. Any other (or a replacement for its own,
//! e.g. a static build) is a file the operator puts in the data directory as
//! `dist/<target>`; a file there wins over the gateway's own executable.
//!
//! The installer script embeds the SHA-256 of every build, taken when the script is
//! served, and checks the download against it: a file that changes between the two
//! (replaced on the gateway, or altered on the way) is refused on the new machine.
//! Hashes are cached by path, size and modification time, so a 20 MB executable is
//! read once, not at every script request.

use super::error::InstallError;
use sha2::{Digest, Sha256};
use std::collections::HashMap;
use std::io::Read;
use std::path::{Path, PathBuf};
use std::sync::Mutex;
use std::time::SystemTime;

/// The data directory's subdirectory of operator-supplied builds.
pub const DIST_DIR: &str = "dist";
/// At most this many entries of `dist/` are looked at.
const MAX_BUILDS: usize = 64;

/// One build: where it lives and what it is for.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Build {
    pub target: String,
    pub path: PathBuf,
}

/// The builds on offer.
pub struct Dist {
    dir: PathBuf,
    own: Build,
    hashes: Mutex<HashMap<PathBuf, Hashed>>,
}

#[derive(Clone)]
struct Hashed {
    len: u64,
    modified: Option<SystemTime>,
    sha256: String,
}

/// This executable's target name: `{OS}-{ARCH}` as Rust names them.
pub fn own_target() -> String {
    format!("{}-{}", std::env::consts::OS, std::env::consts::ARCH)
}

/// The running executable. On Linux `/proc/self/exe`, which still opens the program
/// that runs even after the file was replaced by an upgrade.
fn own_exe() -> PathBuf {
    #[cfg(target_os = "linux")]
    {
        PathBuf::from("/proc/self/exe")
    }
    #[cfg(not(target_os = "linux"))]
    {
        std::env::current_exe().unwrap_or_else(|_| PathBuf::from("gsv"))
    }
}

/// Whether `s` is a build name: `os-arch`, each 1-16 characters of `a-z`, `0-9`, `_`.
pub fn valid_target(s: &str) -> bool {
    let part = |p: &str| {
        !p.is_empty()
            && p.len() <= 16
            && p.bytes()
                .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'_')
    };
    matches!(s.split_once('-'), Some((os, arch)) if part(os) && part(arch))
}

impl Dist {
    /// The builds of a gateway whose data directory is `data_dir`.
    pub fn new(data_dir: &Path) -> Dist {
        Dist {
            dir: data_dir.join(DIST_DIR),
            own: Build {
                target: own_target(),
                path: own_exe(),
            },
            hashes: Mutex::new(HashMap::new()),
        }
    }

    /// Every build, sorted by target: the files in `dist/` (regular files, or symlinks
    /// to them, named after a target) and the gateway's own executable unless `dist/`
    /// has one for the same target.
    pub fn builds(&self) -> Vec<Build> {
        let mut builds: Vec<Build> = match std::fs::read_dir(&self.dir) {
            Ok(entries) => entries
                .filter_map(Result::ok)
                .take(MAX_BUILDS)
                .filter_map(|e| {
                    let target = e.file_name().to_str()?.to_owned();
                    let path = e.path();
                    (valid_target(&target) && path.is_file()).then_some(Build { target, path })
                })
                .collect(),
            Err(_) => Vec::new(),
        };
        if !builds.iter().any(|b| b.target == self.own.target) {
            builds.push(self.own.clone());
        }
        builds.sort_by(|a, b| a.target.cmp(&b.target));
        builds
    }

    /// The build for `target`.
    pub fn find(&self, target: &str) -> Result<Build, InstallError> {
        if !valid_target(target) {
            return Err(InstallError::BadTarget(target.to_owned()));
        }
        let builds = self.builds();
        match builds.iter().find(|b| b.target == target) {
            Some(b) => Ok(b.clone()),
            None => Err(InstallError::UnknownTarget {
                target: target.to_owned(),
                available: builds
                    .iter()
                    .map(|b| b.target.as_str())
                    .collect::<Vec<_>>()
                    .join(", "),
            }),
        }
    }

    /// Every build with its SHA-256 (64 lowercase hex digits). Blocking: reads files.
    pub fn hashed(&self) -> Result<Vec<(Build, String)>, InstallError> {
        self.builds()
            .into_iter()
            .map(|b| {
                let sha = self.sha256(&b.path)?;
                Ok((b, sha))
            })
            .collect()
    }

    /// The SHA-256 of a file, from the cache while its size and mtime are unchanged.
    fn sha256(&self, path: &Path) -> Result<String, InstallError> {
        let read_error = |source| InstallError::Read {
            path: path.to_owned(),
            source,
        };
        let meta = std::fs::metadata(path).map_err(read_error)?;
        let (len, modified) = (meta.len(), meta.modified().ok());
        let cached = self
            .hashes
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .get(path)
            .filter(|h| h.len == len && h.modified == modified)
            .map(|h| h.sha256.clone());
        if let Some(sha) = cached {
            return Ok(sha);
        }
        let sha256 = sha256_file(path).map_err(read_error)?;
        self.hashes
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .insert(
                path.to_owned(),
                Hashed {
                    len,
                    modified,
                    sha256: sha256.clone(),
                },
            );
        Ok(sha256)
    }
}

/// SHA-256 of a file's contents, as 64 lowercase hex digits.
pub fn sha256_file(path: &Path) -> std::io::Result<String> {
    let mut file = std::fs::File::open(path)?;
    let mut hasher = Sha256::new();
    let mut buf = vec![0u8; 1 << 16];
    loop {
        let n = file.read(&mut buf)?;
        if n == 0 {
            break;
        }
        hasher.update(&buf[..n]);
    }
    Ok(hex::encode(hasher.finalize()))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn temp_dir(tag: &str) -> PathBuf {
        let d = std::env::temp_dir().join(format!("gsv-dist-{tag}-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&d);
        std::fs::create_dir_all(&d).unwrap();
        d
    }

    #[test]
    fn target_names() {
        assert!(valid_target("linux-x86_64"));
        assert!(valid_target("macos-aarch64"));
        for bad in [
            "",
            "linux",
            "-x86_64",
            "linux-",
            "Linux-x86_64",
            "../x",
            "linux-x86_64/..",
            "a-b-c",
        ] {
            assert!(!valid_target(bad), "{bad}");
        }
        assert!(valid_target(&own_target()), "{}", own_target());
    }

    #[test]
    fn operator_builds_join_and_override_the_own_one() {
        let data = temp_dir("builds");
        let dist = Dist::new(&data);
        let own = own_target();
        assert_eq!(
            dist.builds().iter().map(|b| &b.target).collect::<Vec<_>>(),
            [&own]
        );
        std::fs::create_dir_all(data.join(DIST_DIR)).unwrap();
        std::fs::write(data.join(DIST_DIR).join("zzos-arm"), b"other build").unwrap();
        std::fs::write(data.join(DIST_DIR).join("not a target"), b"x").unwrap();
        std::fs::create_dir_all(data.join(DIST_DIR).join("aaos-dir")).unwrap();
        let targets: Vec<String> = dist.builds().into_iter().map(|b| b.target).collect();
        assert_eq!(targets, [own.clone(), "zzos-arm".to_owned()]);
        let hashed = dist.hashed().unwrap();
        // sha256 of "other build"
        assert_eq!(
            hashed[1].1,
            "caa557f5c5916c9dfe1713ee3495117ec31bd617d13be1405b676dbe3fbac043"
        );
        // Replacing the own target's build, and a changed file gets a new hash.
        std::fs::write(data.join(DIST_DIR).join(&own), b"static build").unwrap();
        let build = dist.find(&own).unwrap();
        assert_eq!(build.path, data.join(DIST_DIR).join(&own));
        let first = dist.hashed().unwrap()[0].1.clone();
        std::fs::write(data.join(DIST_DIR).join(&own), b"tampered build!").unwrap();
        assert_ne!(dist.hashed().unwrap()[0].1, first);
        assert!(matches!(
            dist.find("nope-nope"),
            Err(InstallError::UnknownTarget { .. })
        ));
        assert!(matches!(
            dist.find("../gsv.db"),
            Err(InstallError::BadTarget(_))
        ));
        let _ = std::fs::remove_dir_all(&data);
    }
}
