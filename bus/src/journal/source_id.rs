//! The identity of the source a journal records (`source-id` in the journal's folder): for a
//! ring, when it was created. A recorder restarted on a ring that was recreated since (a reboot,
//! `ring rm`) sees another identity and refuses, because the new ring's positions name other
//! messages: telling a restarted source apart by its position alone spliced a new ring's
//! messages into the old journal as if they were a redelivery.
//!
//! The file is read only if it is a regular file, through no symlink, and at most a few bytes;
//! it is replaced by a new file made with `O_EXCL | O_NOFOLLOW` and renamed over it, so a link
//! planted in the folder is neither followed nor written through.
use std::fs::{File, OpenOptions};
use std::io::{Read, Write};
use std::os::unix::fs::OpenOptionsExt;
use std::path::Path;

use super::error::JournalError;

const FILE: &str = "source-id";
const TMP: &str = "source-id.tmp";
const TAG: &str = "tickbus-source-id v1 ";

/// The identity recorded in `dir`, if any.
pub(crate) fn read(dir: &Path) -> Result<Option<u64>, JournalError> {
    let path = dir.join(FILE);
    let mut f = match OpenOptions::new().read(true).custom_flags(libc::O_NOFOLLOW | libc::O_NONBLOCK).open(&path) {
        Ok(f) => f,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(None),
        Err(e) => {
            return Err(JournalError::io("opening the journal's source identity (a symlink is refused)", path, e))
        }
    };
    let meta = f.metadata().map_err(|e| JournalError::io("reading the journal's source identity", &path, e))?;
    if !meta.is_file() {
        return Err(JournalError::io(
            "reading the journal's source identity",
            path,
            std::io::Error::other("not a regular file: remove it"),
        ));
    }
    let mut buf = [0u8; 64];
    let mut n = 0;
    while n < buf.len() {
        match f.read(&mut buf[n..]) {
            Ok(0) => break,
            Ok(k) => n += k,
            Err(e) => return Err(JournalError::io("reading the journal's source identity", path, e)),
        }
    }
    let text = std::str::from_utf8(&buf[..n]).unwrap_or("");
    match text.strip_prefix(TAG).and_then(|t| t.trim_end().parse::<u64>().ok()) {
        Some(id) => Ok(Some(id)),
        None => Err(JournalError::io(
            "reading the journal's source identity",
            path,
            std::io::Error::other(format!(
                "expected '{TAG}<number>', found {:?}: remove the file if the journal's source is known",
                text.chars().take(40).collect::<String>()
            )),
        )),
    }
}

/// Records `id` as the identity of the source `dir` records (durably: file and folder synced).
pub(crate) fn write(dir: &Path, id: u64) -> Result<(), JournalError> {
    let tmp = dir.join(TMP);
    // A crash may have left the temporary file: remove it (unlink removes a link, not its target).
    match std::fs::remove_file(&tmp) {
        Ok(()) => {}
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
        Err(e) => return Err(JournalError::io("removing a stale source identity file", tmp, e)),
    }
    let mut f = OpenOptions::new()
        .write(true)
        .create_new(true)
        .mode(0o644)
        .custom_flags(libc::O_NOFOLLOW)
        .open(&tmp)
        .map_err(|e| JournalError::io("creating the journal's source identity", &tmp, e))?;
    f.write_all(format!("{TAG}{id}\n").as_bytes())
        .and_then(|()| f.sync_all())
        .map_err(|e| JournalError::io("writing the journal's source identity", &tmp, e))?;
    let path = dir.join(FILE);
    std::fs::rename(&tmp, &path).map_err(|e| JournalError::io("renaming the journal's source identity", &path, e))?;
    File::open(dir).and_then(|d| d.sync_all()).map_err(|e| JournalError::io("syncing the journal folder", dir, e))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn round_trips_and_refuses_links_and_junk() {
        let dir = std::env::temp_dir().join(format!("tickbus-source-id-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).unwrap();
        assert_eq!(read(&dir).unwrap(), None);
        write(&dir, 42).unwrap();
        assert_eq!(read(&dir).unwrap(), Some(42));
        write(&dir, 43).unwrap();
        assert_eq!(read(&dir).unwrap(), Some(43));
        std::fs::write(dir.join(FILE), "junk").unwrap();
        assert!(read(&dir).unwrap_err().to_string().contains("expected"), "junk is refused");
        // 42 bytes of valid UTF-8 whose 40th byte is inside a character (a review: it panicked).
        std::fs::write(dir.join(FILE), "€".repeat(14)).unwrap();
        assert!(read(&dir).unwrap_err().to_string().contains("expected"), "multi-byte junk is refused");
        std::fs::remove_file(dir.join(FILE)).unwrap();
        let target = dir.join("elsewhere");
        std::fs::write(&target, format!("{TAG}7\n")).unwrap();
        std::os::unix::fs::symlink(&target, dir.join(FILE)).unwrap();
        assert!(read(&dir).is_err(), "a symlink is not followed");
        // A link planted as the temporary file is removed, not written through.
        std::fs::remove_file(dir.join(FILE)).unwrap();
        std::os::unix::fs::symlink(&target, dir.join(TMP)).unwrap();
        write(&dir, 9).unwrap();
        assert_eq!(std::fs::read_to_string(&target).unwrap(), format!("{TAG}7\n"));
        assert_eq!(read(&dir).unwrap(), Some(9));
        let _ = std::fs::remove_dir_all(&dir);
    }
}
