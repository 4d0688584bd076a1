//! Ring folders and files that only their owner can touch.
//!
//! Owns: the checks that stop another local user from planting a folder, a symlink or a ring
//! of their own where a publisher or subscriber looks. A ring folder must be a real folder (not
//! a link) owned by us and writable by nobody else, inside a parent that others cannot rename
//! it in; a ring file must be a regular file (not a link) owned by us that nobody else can read
//! or write. Files are opened relative to the checked folder (`openat`, `O_NOFOLLOW`), created
//! with `O_EXCL`, so no path component can be swapped between the check and the use.
use std::fs::File;
use std::io::ErrorKind;
use std::os::unix::fs::DirBuilderExt;
use std::path::{Path, PathBuf};

use super::error::ShmError;
use crate::sys::fs::{not_private, parent_not_safe, Dir};

/// A checked ring folder.
pub(crate) struct RingDir {
    dir: Dir,
    path: PathBuf,
}

/// Where opening a ring file found one, or that there was none.
pub(crate) enum Found {
    File(File),
    Absent,
}

impl RingDir {
    /// Opens ring folder `path` and checks it (creating it, mode 0700, with `create`). Ok(None)
    /// if it does not exist and `create` is false.
    pub fn open(path: &Path, create: bool) -> Result<Option<RingDir>, ShmError> {
        if create {
            std::fs::DirBuilder::new().recursive(true).mode(0o700).create(path).map_err(|source| ShmError::Io {
                what: "creating the ring folder",
                path: path.to_owned(),
                source,
            })?;
        }
        let dir = match Dir::open_nofollow(path) {
            Ok(d) => d,
            Err(e) if e.kind() == ErrorKind::NotFound && !create => return Ok(None),
            Err(e) if is_link_error(&e) => return Err(unsafe_path(path, "it is a symbolic link".into())),
            Err(source) => return Err(ShmError::Io { what: "opening the ring folder", path: path.to_owned(), source }),
        };
        let md = dir.metadata().map_err(|source| ShmError::Io {
            what: "inspecting the ring folder",
            path: path.to_owned(),
            source,
        })?;
        if let Some(why) = not_private(&md, 0o022) {
            return Err(unsafe_path(path, format!("{why}: anyone else could swap ring files in it")));
        }
        check_parent(path)?;
        Ok(Some(RingDir { dir, path: path.to_owned() }))
    }

    /// Opens existing ring file `name` and checks it.
    pub fn open_ring(&self, name: &str) -> Result<Found, ShmError> {
        match self.dir.open_file(name, false) {
            Ok(f) => self.checked(name, f).map(Found::File),
            Err(e) if e.kind() == ErrorKind::NotFound => Ok(Found::Absent),
            Err(e) => Err(self.open_error(name, e)),
        }
    }

    /// Opens ring file `name`, creating it (mode 0600, exclusively) if there is none.
    pub fn open_or_create_ring(&self, name: &str) -> Result<File, ShmError> {
        for _ in 0..3 {
            if let Found::File(f) = self.open_ring(name)? {
                return Ok(f);
            }
            match self.dir.open_file(name, true) {
                Ok(f) => return self.checked(name, f),
                Err(e) if e.kind() == ErrorKind::AlreadyExists => continue, // raced another opener
                Err(e) => return Err(self.open_error(name, e)),
            }
        }
        Err(ShmError::Io {
            what: "creating the ring file",
            path: self.path.join(name),
            source: std::io::Error::other("it kept appearing and disappearing"),
        })
    }

    /// Removes ring file `name` from this folder.
    pub fn unlink(&self, name: &str) -> Result<(), ShmError> {
        self.dir.unlink(name).map_err(|source| ShmError::Io {
            what: "removing the ring file",
            path: self.path.join(name),
            source,
        })
    }

    fn checked(&self, name: &str, f: File) -> Result<File, ShmError> {
        let path = self.path.join(name);
        let md = f.metadata().map_err(|source| ShmError::Io { what: "inspecting", path: path.clone(), source })?;
        if !md.file_type().is_file() {
            return Err(unsafe_path(&path, "it is not a regular file".into()));
        }
        if let Some(why) = not_private(&md, 0o077) {
            return Err(unsafe_path(
                &path,
                format!("{why}: anyone else could read the stream or inject messages; `chmod 600` it if it is yours"),
            ));
        }
        Ok(f)
    }

    fn open_error(&self, name: &str, e: std::io::Error) -> ShmError {
        let path = self.path.join(name);
        if is_link_error(&e) {
            return unsafe_path(&path, "it is a symbolic link".into());
        }
        ShmError::Io { what: "opening the ring file", path, source: e }
    }
}

/// `O_NOFOLLOW` on a link fails with ELOOP; `O_DIRECTORY` on a link to a file with ENOTDIR.
fn is_link_error(e: &std::io::Error) -> bool {
    matches!(e.raw_os_error(), Some(libc::ELOOP) | Some(libc::ENOTDIR))
}

/// The folder's parent must not let others rename or replace it (see [`parent_not_safe`]).
fn check_parent(path: &Path) -> Result<(), ShmError> {
    match parent_not_safe(path) {
        Ok(None) => Ok(()),
        Ok(Some((parent, why))) => {
            Err(unsafe_path(&parent, format!("{why}: anyone else could replace the ring folder in it")))
        }
        Err(source) => Err(ShmError::Io {
            what: "inspecting the ring folder's parent",
            path: path.parent().unwrap_or(path).to_owned(),
            source,
        }),
    }
}

fn unsafe_path(path: &Path, reason: String) -> ShmError {
    ShmError::Unsafe { path: path.to_owned(), reason }
}
