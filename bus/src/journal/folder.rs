//! A journal folder's files under the ring files' rules: whoever else can write the folder could
//! plant a link or a FIFO where the recorder creates, truncates or reads a file, so
//! - a folder recorded into is a real folder (not a link), owned by this process's user, that
//!   nobody else may write, in a parent nobody else can rename it in;
//! - files are created exclusively (`O_CREAT | O_EXCL`, mode 0640) and never through a link
//!   (`O_NOFOLLOW`): a stale one is unlinked first (which removes a link, not its target);
//! - files are opened only if they are regular files, and read with a bound, so a link to
//!   `/dev/zero` or a FIFO planted as a segment or index neither hangs nor fills memory.
//!
//! Readers do not check the owner (a journal is read by other users: research, replay); they
//! only refuse anything that is not a regular file.
use std::fs::{File, OpenOptions};
use std::io::ErrorKind;
use std::os::unix::fs::{DirBuilderExt, OpenOptionsExt};
use std::path::Path;

use memmap2::Mmap;

use super::error::JournalError;
use crate::sys::fs::{not_private, open_regular, parent_not_safe, Dir};

/// Mode of files a journal writer creates: its user writes, its group reads (replay, research).
const FILE_MODE: u32 = 0o640;

/// Creates `dir` (mode 0750) if need be and checks it is safe to record into.
pub(crate) fn check_for_writing(dir: &Path) -> Result<(), JournalError> {
    std::fs::DirBuilder::new()
        .recursive(true)
        .mode(0o750)
        .create(dir)
        .map_err(|e| JournalError::io("creating the journal folder", dir, e))?;
    let opened = match Dir::open_nofollow(dir) {
        Ok(d) => d,
        Err(e) if matches!(e.raw_os_error(), Some(libc::ELOOP) | Some(libc::ENOTDIR)) => {
            return Err(refused(dir, "it is a symbolic link: give the folder it names".into()))
        }
        Err(e) => return Err(JournalError::io("opening the journal folder", dir, e)),
    };
    let md = opened.metadata().map_err(|e| JournalError::io("inspecting the journal folder", dir, e))?;
    if let Some(why) = not_private(&md, 0o022) {
        return Err(refused(dir, format!("{why}: anyone else could plant links or files where the recorder writes")));
    }
    match parent_not_safe(dir) {
        Ok(None) => Ok(()),
        Ok(Some((parent, why))) => {
            Err(refused(&parent, format!("{why}: anyone else could replace the journal folder in it")))
        }
        Err(e) => Err(JournalError::io("inspecting the journal folder's parent", dir, e)),
    }
}

fn refused(path: &Path, reason: String) -> JournalError {
    JournalError::Unsafe { path: path.to_owned(), reason }
}

/// Creates `path` exclusively for writing, never through a link. `replace`: a stale entry of that
/// name (a file a crash left, or anything planted) is unlinked first.
pub(crate) fn create(path: &Path, replace: bool, what: &'static str) -> Result<File, JournalError> {
    if replace {
        match std::fs::remove_file(path) {
            Err(e) if e.kind() != ErrorKind::NotFound => {
                return Err(JournalError::io("removing a stale file", path, e))
            }
            _ => {}
        }
    }
    OpenOptions::new()
        .write(true)
        .create_new(true)
        .mode(FILE_MODE)
        .custom_flags(libc::O_NOFOLLOW | libc::O_CLOEXEC)
        .open(path)
        .map_err(|e| JournalError::io(what, path, e))
}

/// Opens existing regular file `path` for writing (to seal or cut it), never through a link.
pub(crate) fn open_for_writing(path: &Path, what: &'static str) -> Result<File, JournalError> {
    let f = OpenOptions::new()
        .write(true)
        .custom_flags(libc::O_NOFOLLOW | libc::O_NONBLOCK | libc::O_CLOEXEC)
        .open(path)
        .map_err(|e| JournalError::io(what, path, link_said(e)))?;
    regular(f, path, what)
}

/// Opens `path` for reading if it is a regular file (no link followed, no FIFO or device).
pub(crate) fn open_for_reading(path: &Path, what: &'static str) -> Result<File, JournalError> {
    open_regular(path).map_err(|e| JournalError::io(what, path, link_said(e)))
}

/// The writer lock file: opened or created, never through a link, and a regular file.
pub(crate) fn lock_file(path: &Path) -> Result<File, JournalError> {
    let f = OpenOptions::new()
        .read(true)
        .write(true)
        .create(true)
        .truncate(false)
        .mode(FILE_MODE)
        .custom_flags(libc::O_NOFOLLOW | libc::O_NONBLOCK | libc::O_CLOEXEC)
        .open(path)
        .map_err(|e| JournalError::io("opening the writer lock", path, link_said(e)))?;
    regular(f, path, "opening the writer lock")
}

fn regular(f: File, path: &Path, what: &'static str) -> Result<File, JournalError> {
    match f.metadata() {
        Ok(m) if m.is_file() => Ok(f),
        Ok(_) => Err(JournalError::io(what, path, std::io::Error::other("not a regular file: remove it"))),
        Err(e) => Err(JournalError::io(what, path, e)),
    }
}

/// `O_NOFOLLOW` on a link fails with `ELOOP`, whose text ("too many levels of symbolic links")
/// does not say what happened.
fn link_said(e: std::io::Error) -> std::io::Error {
    if e.raw_os_error() == Some(libc::ELOOP) {
        return std::io::Error::other("it is a symbolic link, which a journal never follows: remove it");
    }
    e
}

/// A regular file mapped read-only (a segment scanned on reopen: no copy the size of the file).
pub(crate) fn map(path: &Path, what: &'static str) -> Result<Mmap, JournalError> {
    let f = open_for_reading(path, what)?;
    // SAFETY: mapped read-only, and only while this writer holds the journal's lock, so no
    // journal writer changes the file; every byte read through the map is bounds- and
    // CRC-checked before it is believed. A program outside tickbus truncating the file under the
    // map would fault this process (SIGBUS), as with any mapped file.
    unsafe { Mmap::map(&f) }.map_err(|e| JournalError::io(what, path, e))
}
