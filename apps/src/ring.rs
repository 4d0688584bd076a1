//! `tickbus ring ...`: inspect and remove shared-memory rings.
use tickbus::shm::{self, PublisherState, ShmOptions};
use tickbus::StartAt;

pub fn rm(name: &str, opts: &ShmOptions) -> Result<(), String> {
    match shm::remove(name, opts) {
        Ok(true) => {
            println!("removed ring {name}");
            Ok(())
        }
        Ok(false) => {
            Err(format!("no ring named {name} in {} or {}", opts.hugepage_dir.display(), opts.fallback_dir.display()))
        }
        Err(e) => Err(e.to_string()),
    }
}

pub fn inspect(name: &str, opts: &ShmOptions) -> Result<(), String> {
    let s = shm::open_observer_uncounted(name, StartAt::Latest, opts).map_err(|e| e.to_string())?;
    let st = s.reader().status();
    let c = &st.config;
    println!("ring      {} ({:?})", s.path().display(), s.backing());
    println!(
        "layout    {:?}, stream {}, {} slots x {} B (payload <= {} B), {:.3} TSC ticks/ns",
        c.mode,
        c.stream_id,
        c.slot_count,
        c.slot_size,
        c.max_payload(),
        c.ticks_per_ns
    );
    let state = match s.publisher_state() {
        PublisherState::Live { pid, .. } => format!("live (pid {pid})"),
        PublisherState::Closed { .. } => "closed cleanly".to_owned(),
        PublisherState::Dead { pid, .. } => {
            format!("DEAD (pid {pid} exited without closing; a new publisher will reclaim the ring)")
        }
    };
    println!("publisher {state}, epoch {}, {} messages published", st.epoch, st.producer_position);
    for l in &st.consumers {
        let owner = match l.owner {
            0 => "no consumer attached".to_owned(),
            pid if tickbus::shm::process_alive(pid) => format!("pid {pid}"),
            pid => format!("pid {pid} (DEAD: the next consumer takes this line over)"),
        };
        println!(
            "consumer  {}: position {} ({} behind), {owner}, {} attaches",
            l.index,
            l.position,
            st.producer_position.saturating_sub(l.position),
            l.attaches
        );
    }
    Ok(())
}
