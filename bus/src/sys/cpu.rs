//! Which CPUs the kernel isolated (isolcpus=): core_affinity pins anywhere and never says
//! whether the core is shared with the rest of the system, so we read it ourselves.

/// CPUs listed in /sys/devices/system/cpu/isolated (empty if none or unreadable).
pub fn isolated_cpus() -> Vec<usize> {
    std::fs::read_to_string("/sys/devices/system/cpu/isolated").map(|s| parse_cpu_list(&s)).unwrap_or_default()
}

/// Parses the kernel's CPU list format, e.g. `"1,3-5\n"` -> `[1, 3, 4, 5]`. Bad parts are skipped.
pub fn parse_cpu_list(s: &str) -> Vec<usize> {
    let mut out = Vec::new();
    for part in s.trim().split(',').filter(|p| !p.is_empty()) {
        match part.split_once('-') {
            Some((a, b)) => {
                // No kernel numbers a CPU past 8191: a range past it is cut there, never expanded
                // into billions of entries.
                if let (Ok(a), Ok(b)) = (a.trim().parse::<usize>(), b.trim().parse::<usize>()) {
                    out.extend(a..=b.min(8191));
                }
            }
            None => out.extend(part.trim().parse::<usize>().ok()),
        }
    }
    out
}

/// The calling thread's CPU affinity, to be given back with [`set_affinity`].
pub struct Affinity(libc::cpu_set_t);

impl Affinity {
    /// The cores in the set, listed (what the tests check).
    #[cfg(test)]
    pub fn cores(&self) -> Vec<usize> {
        // SAFETY: CPU_ISSET reads one bit of a whole cpu_set_t; every index is below its
        // CPU_SETSIZE (1024) bits.
        (0..libc::CPU_SETSIZE as usize).filter(|&c| unsafe { libc::CPU_ISSET(c, &self.0) }).collect()
    }
}

/// The cores the calling thread may run on.
pub fn affinity() -> std::io::Result<Affinity> {
    // SAFETY: cpu_set_t is plain data; all zeroes is a valid (empty) set.
    let mut set: libc::cpu_set_t = unsafe { std::mem::zeroed() };
    // SAFETY: pid 0 is the calling thread; the kernel writes at most the size passed, that of
    // the set it is given.
    if unsafe { libc::sched_getaffinity(0, std::mem::size_of::<libc::cpu_set_t>(), &mut set) } != 0 {
        return Err(std::io::Error::last_os_error());
    }
    Ok(Affinity(set))
}

/// Gives the calling thread the cores of `a` (as [`affinity`] read them).
pub fn set_affinity(a: &Affinity) -> std::io::Result<()> {
    // SAFETY: pid 0 is the calling thread; the set is a whole cpu_set_t and its size is passed
    // with it.
    if unsafe { libc::sched_setaffinity(0, std::mem::size_of::<libc::cpu_set_t>(), &a.0) } != 0 {
        return Err(std::io::Error::last_os_error());
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_ranges_singles_and_junk() {
        assert_eq!(parse_cpu_list("1,3-5\n"), vec![1, 3, 4, 5]);
        assert_eq!(parse_cpu_list("\n"), Vec::<usize>::new());
        assert_eq!(parse_cpu_list("x,2"), vec![2]);
        assert_eq!(parse_cpu_list("8190-4000000000").len(), 2);
    }
}
