//! Process identity and liveness, used to tell a crashed publisher or consumer from a live one.

/// This process's id, as the token it writes into ring headers.
pub fn pid() -> u64 {
    u64::from(std::process::id())
}

/// Whether process `pid` exists (it may belong to another user: EPERM still means alive).
pub fn alive(pid: u64) -> bool {
    let Ok(p) = libc::pid_t::try_from(pid) else { return false };
    if p <= 0 {
        return false;
    }
    // SAFETY: kill with signal 0 performs only the existence and permission check.
    let rc = unsafe { libc::kill(p, 0) };
    rc == 0 || std::io::Error::last_os_error().raw_os_error() == Some(libc::EPERM)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn self_is_alive_and_a_reaped_child_is_not() {
        assert!(alive(pid()));
        let mut child = std::process::Command::new("true").spawn().unwrap();
        let id = u64::from(child.id());
        child.wait().unwrap();
        assert!(!alive(id));
        assert!(!alive(0));
    }
}
