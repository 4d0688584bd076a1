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

/// This process's RLIMIT_MEMLOCK as (soft, hard) bytes, `None` for unlimited; `Err` if the
/// kernel would not say.
pub fn memlock_limit() -> std::io::Result<(Option<u64>, Option<u64>)> {
    let mut lim = libc::rlimit { rlim_cur: 0, rlim_max: 0 };
    // SAFETY: `lim` is a valid, writable rlimit for the call's duration.
    if unsafe { libc::getrlimit(libc::RLIMIT_MEMLOCK, &mut lim) } != 0 {
        return Err(std::io::Error::last_os_error());
    }
    let bytes = |v: libc::rlim_t| (v != libc::RLIM_INFINITY).then_some(v);
    Ok((bytes(lim.rlim_cur), bytes(lim.rlim_max)))
}

/// When process `pid` started, in clock ticks since boot (field 22 of /proc/PID/stat): with the
/// pid, it names one process for good, so a recycled pid is never taken for a crashed one.
pub fn start_time(pid: u64) -> Option<u64> {
    proc_stat(pid).map(|(_, start)| start)
}

/// Process `pid`'s real and effective uids (the `Uid:` line of /proc/PID/status), if it exists.
pub fn uids(pid: u64) -> Option<(u32, u32)> {
    let status = std::fs::read(format!("/proc/{pid}/status")).ok()?;
    let line = status.split(|&b| b == b'\n').find_map(|l| l.strip_prefix(b"Uid:"))?;
    let mut ids = std::str::from_utf8(line).ok()?.split_whitespace().map(|v| v.parse::<u32>().ok());
    Some((ids.next()??, ids.next()??))
}

/// Process `pid`'s state letter (field 3: `R`, `S`, `Z` for a zombie, ...) and start time.
pub fn proc_stat(pid: u64) -> Option<(u8, u64)> {
    // Bytes, not a String: the command name may be cut mid-character and is not UTF-8 then.
    let stat = std::fs::read(format!("/proc/{pid}/stat")).ok()?;
    // The command name (field 2) is in parentheses and may hold spaces: count from its end.
    let rest = &stat[stat.iter().rposition(|&b| b == b')')? + 1..];
    let mut fields = rest.split(|b| b.is_ascii_whitespace()).filter(|f| !f.is_empty());
    let state = *fields.next()?.first()?;
    let start = std::str::from_utf8(fields.nth(18)?).ok()?.parse().ok()?;
    Some((state, start))
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

    #[test]
    fn start_time_names_a_process_and_not_a_gone_one() {
        let mine = start_time(pid()).expect("our own start time");
        assert_eq!(start_time(pid()), Some(mine), "stable");
        let mut child = std::process::Command::new("true").spawn().unwrap();
        let id = u64::from(child.id());
        child.wait().unwrap();
        assert_eq!(start_time(id), None);
        assert!(matches!(proc_stat(pid()), Some((b'R' | b'S', s)) if s == mine));
    }
}
