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
