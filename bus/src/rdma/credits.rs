//! When a reliable subscriber's credits go back to its publisher, and how many may be in
//! flight: the pacing that keeps credit WRITEs off the per-message path, and the send-queue
//! window that keeps posts from outrunning the queue.

/// Empty polls in a row after which the stream counts as quiet and a reliable subscriber's
/// credit catches up with what it released (a few microseconds of busy-polling on hardware),
/// so the publisher's view of its lag (`tickbus stat`, [`super::SubscriberInfo::consumed`]) is
/// exact whenever the stream pauses.
pub(crate) const QUIET_POLLS: u32 = 1024;

/// When a credit is due. While messages keep coming, once an eighth of the ring more was
/// released; once the stream goes quiet ([`QUIET_POLLS`]), whatever was released. Per message,
/// credits would double the WRITEs on the link (and on Soft-RoCE the doorbell syscalls) for
/// nothing: the publisher needs them only before its ring fills, and a publisher held up by a
/// full ring means this reader can release the whole ring, far more than an eighth, so pacing
/// never stalls it (and the publisher, held up, sends nothing, so the stream goes quiet too).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct CreditPace {
    every: u64,
    empty_polls: u32,
}

impl CreditPace {
    /// Pacing for a ring of `slot_count` slots (a credit at least every eighth of it).
    pub fn new(slot_count: usize) -> CreditPace {
        CreditPace { every: (slot_count as u64 / 8).max(1), empty_polls: QUIET_POLLS }
    }

    /// One poll of the ring: whether it found a message.
    #[inline]
    pub fn polled(&mut self, found: bool) {
        self.empty_polls = if found { 0 } else { self.empty_polls.saturating_add(1) };
    }

    /// Whether to send the credit `released` now, `sent` being the last one sent.
    #[inline]
    pub fn due(&self, released: u64, sent: u64) -> bool {
        released > sent && (released - sent >= self.every || self.empty_polls >= QUIET_POLLS)
    }
}

/// How many WRs a send queue holds as far as we know: on NICs a slot frees only when the
/// completion of its WR, or of a later signalled one, is polled. Credits are cumulative, so when
/// the queue is full the newest credit simply waits for room: posts never outrun the queue.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct SendWindow {
    /// WRs posted (a WR's wr_id is its ordinal) and known complete.
    pub posted: u64,
    pub done: u64,
    /// WRs the queue may hold, and how often one asks for a completion.
    pub depth: u64,
    pub signal_every: u64,
}

impl SendWindow {
    pub fn new(queue: u32) -> SendWindow {
        let depth = u64::from(queue.max(2)) - 1;
        SendWindow { posted: 0, done: 0, depth, signal_every: (depth / 2).clamp(1, 16) }
    }

    /// Whether one more WR fits.
    pub fn has_room(&self) -> bool {
        self.posted - self.done < self.depth
    }

    /// Takes a slot for the next WR: its wr_id and whether it asks for a completion.
    pub fn post(&mut self) -> (u64, bool) {
        let id = self.posted;
        self.posted += 1;
        (id, self.posted.is_multiple_of(self.signal_every))
    }

    /// A completion of WR `wr_id` (and of every WR before it).
    pub fn completed(&mut self, wr_id: u64) {
        self.done = self.done.max(wr_id + 1).min(self.posted);
    }

    /// Whether it is worth polling for completions now.
    pub fn half_full(&self) -> bool {
        self.posted - self.done >= self.depth / 2
    }
}

#[cfg(test)]
mod tests {
    use super::{CreditPace, SendWindow, QUIET_POLLS};

    /// A thousand credits released while no completion is ever polled (a NIC frees send-queue
    /// slots only then): posting whenever the credit changes (the old way, signalling one WR in
    /// 16 on a 64-entry queue) would have had 1000 WRs outstanding; the window never has more
    /// than the queue holds, and the newest credit goes once a completion frees room.
    #[test]
    fn credits_never_outrun_the_send_queue() {
        let mut w = SendWindow::new(64);
        let (mut posted, mut coalesced, mut signalled) = (0, 0, Vec::new());
        for _ in 0..1000 {
            if w.has_room() {
                let (id, s) = w.post();
                posted += 1;
                if s {
                    signalled.push(id);
                }
            } else {
                coalesced += 1;
            }
            assert!(w.posted - w.done <= w.depth);
        }
        assert_eq!((posted, coalesced), (63, 937));
        assert!(!signalled.is_empty(), "a full window must hold a signalled WR, or it never drains");
        w.completed(*signalled.last().unwrap());
        assert!(w.has_room());
        let w = SendWindow::new(8);
        assert_eq!((w.depth, w.signal_every), (7, 3));
    }

    /// A reader taking 10,000 messages back to back from a 1024-slot ring sends one credit per
    /// 128 (not one per message); the remainder goes once the stream is quiet, not before.
    #[test]
    fn credits_go_per_eighth_of_the_ring_while_messages_keep_coming() {
        let mut p = CreditPace::new(1024);
        let (mut sent, mut credits) = (0u64, 0u64);
        for released in 1..=10_000u64 {
            p.polled(true);
            if p.due(released, sent) {
                (sent, credits) = (released, credits + 1);
            }
        }
        assert_eq!((credits, sent), (78, 9984), "10,000 / 128 credits, the last at 78 * 128");
        for _ in 1..QUIET_POLLS {
            p.polled(false);
            assert!(!p.due(10_000, sent), "a credit before the stream was quiet");
        }
        p.polled(false);
        assert!(p.due(10_000, sent), "quiet: the remainder is due");
        assert!(!p.due(sent, sent), "nothing new released: nothing due");
    }

    /// A publisher held up by a full ring: the reader can release the whole ring, so the credit
    /// is due at once, quiet or not; a fresh subscriber's first credit needs no quiet wait; a
    /// tiny ring still paces by one.
    #[test]
    fn a_full_ring_or_a_fresh_subscriber_never_waits_for_quiet() {
        let mut p = CreditPace::new(1024);
        assert!(p.due(1, 0), "a fresh subscriber starts quiet");
        p.polled(true);
        assert!(!p.due(127, 0));
        assert!(p.due(1024, 0), "a full ring's worth released");
        let mut tiny = CreditPace::new(4);
        tiny.polled(true);
        assert!(tiny.due(1, 0), "a ring of fewer than 8 slots: every message");
    }
}
