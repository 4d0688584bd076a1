//! Sequence order for MoldUDP64 messages read back from a capture (`tickbus feed --file`): one
//! line, no clock, no retransmission server. A hole is published as a gap, a message at or below
//! one already delivered is a duplicate (or a later session in the same capture); and, as on
//! the live lines ([`super::Arbiter`]), a jump ahead is believed only when a later datagram
//! continues it: one stray or forged datagram far ahead (2^40, or just a thousand past the
//! stream) is discarded when the stream goes on below it, instead of publishing a gap to it and
//! dropping every real message after it as a duplicate.
//!
//! Pure: messages go in (with their capture time, which tells one datagram from the next),
//! verdicts come out.

/// What to do with the messages pushed so far.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum CaptureOut<'a> {
    /// The next message, in order, once.
    Message {
        /// Its MoldUDP64 sequence.
        sequence: u64,
        /// Its bytes.
        payload: &'a [u8],
    },
    /// Messages `[from, to)` are missing from the capture.
    Gap {
        /// The first missing.
        from: u64,
        /// One past the last missing.
        to: u64,
    },
}

/// Counts of what was not delivered.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
#[non_exhaustive]
pub struct CaptureStats {
    /// Messages at or below one already delivered.
    pub duplicates: u64,
    /// Messages of jumps ahead that no later datagram continued (the stream went on below
    /// them, or the capture ended): discarded.
    pub discarded: u64,
    /// Jumps discarded.
    pub jumps_discarded: u64,
}

/// Most messages held in a jump waiting for a later datagram (a datagram holds far fewer).
const MAX_PENDING: usize = 1 << 16;

/// Orders one capture's messages.
#[derive(Debug, Default)]
pub struct CaptureOrder {
    expected: Option<u64>,
    /// A jump ahead not yet continued: its datagram's capture time and messages.
    pending: Vec<(u64, Vec<u8>)>,
    pending_time: Option<u64>,
    stats: CaptureStats,
}

impl CaptureOrder {
    /// Before any message.
    pub fn new() -> CaptureOrder {
        CaptureOrder::default()
    }

    /// What was not delivered so far.
    pub fn stats(&self) -> CaptureStats {
        self.stats
    }

    /// Takes the message `sequence` captured at `time_ns` (messages of one datagram share it).
    pub fn push<E>(
        &mut self,
        sequence: u64,
        time_ns: Option<u64>,
        payload: &[u8],
        out: &mut impl FnMut(CaptureOut<'_>) -> Result<(), E>,
    ) -> Result<(), E> {
        let Some(expected) = self.expected else {
            self.expected = Some(sequence + 1);
            return out(CaptureOut::Message { sequence, payload });
        };
        if let Some(&(first, _)) = self.pending.first() {
            let last = self.pending.last().map_or(first, |p| p.0);
            let same_datagram = time_ns == self.pending_time;
            if sequence == last + 1 && same_datagram && self.pending.len() < MAX_PENDING {
                self.pending.push((sequence, payload.to_vec()));
                return Ok(());
            }
            if sequence > last && !same_datagram {
                // A later datagram continues the jump: it was the stream's.
                self.release(expected, out)?;
                return self.push(sequence, time_ns, payload, out);
            }
            if sequence > last {
                // The same datagram jumps again: hold it with the rest.
                if self.pending.len() < MAX_PENDING {
                    self.pending.push((sequence, payload.to_vec()));
                    return Ok(());
                }
                self.release(expected, out)?;
                return self.push(sequence, time_ns, payload, out);
            }
            // The stream goes on below the jump: it was not the stream's.
            self.discard();
        }
        if sequence < expected {
            self.stats.duplicates += 1;
            return Ok(());
        }
        if sequence > expected {
            self.pending.push((sequence, payload.to_vec()));
            self.pending_time = time_ns;
            return Ok(());
        }
        self.expected = Some(sequence + 1);
        out(CaptureOut::Message { sequence, payload })
    }

    /// The capture ended: a jump no later datagram continued is discarded (counted).
    pub fn finish(&mut self) {
        self.discard();
    }

    fn discard(&mut self) {
        if !self.pending.is_empty() {
            self.stats.discarded += self.pending.len() as u64;
            self.stats.jumps_discarded += 1;
            self.pending.clear();
        }
        self.pending_time = None;
    }

    fn release<E>(&mut self, expected: u64, out: &mut impl FnMut(CaptureOut<'_>) -> Result<(), E>) -> Result<(), E> {
        let pending = std::mem::take(&mut self.pending);
        self.pending_time = None;
        let mut next = expected;
        for (sequence, payload) in &pending {
            if *sequence > next {
                out(CaptureOut::Gap { from: next, to: *sequence })?;
            }
            out(CaptureOut::Message { sequence: *sequence, payload })?;
            next = sequence + 1;
        }
        self.expected = Some(next);
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Delivered sequences, or gaps as `(from, to)`.
    type Got = Vec<Result<u64, (u64, u64)>>;

    fn run(items: &[(u64, u64)]) -> (Got, CaptureStats) {
        let mut c = CaptureOrder::new();
        let mut got = Vec::new();
        for &(seq, t) in items {
            c.push::<()>(seq, Some(t), b"m", &mut |o| {
                got.push(match o {
                    CaptureOut::Message { sequence, .. } => Ok(sequence),
                    CaptureOut::Gap { from, to } => Err((from, to)),
                });
                Ok(())
            })
            .unwrap();
        }
        c.finish();
        (got, c.stats())
    }

    /// Before the fix `feed --file` published a gap to 2^40 and dropped every message after it.
    #[test]
    fn one_stray_datagram_far_ahead_is_discarded_and_the_stream_goes_on() {
        let (got, s) = run(&[(1, 10), (2, 20), (1 << 40, 25), ((1 << 40) + 1, 25), (3, 30), (4, 40)]);
        assert_eq!(got, vec![Ok(1), Ok(2), Ok(3), Ok(4)]);
        assert_eq!((s.discarded, s.jumps_discarded, s.duplicates), (2, 1, 0));
        let (got, _) = run(&[(1, 10), (1005, 20), (2, 30)]);
        assert_eq!(got, vec![Ok(1), Ok(2)], "a near jump too");
    }

    #[test]
    fn a_real_hole_continued_by_the_next_datagram_is_a_gap() {
        let (got, s) = run(&[(1, 10), (2, 10), (5, 20), (6, 20), (7, 30), (7, 31), (3, 40)]);
        assert_eq!(got, vec![Ok(1), Ok(2), Err((3, 5)), Ok(5), Ok(6), Ok(7)]);
        assert_eq!(s.duplicates, 2, "7 twice, and 3 after its gap was published");
    }

    #[test]
    fn a_jump_in_the_last_datagram_is_discarded_and_counted() {
        let (got, s) = run(&[(1, 10), (9, 20)]);
        assert_eq!(got, vec![Ok(1)]);
        assert_eq!((s.discarded, s.jumps_discarded), (1, 1));
    }
}
