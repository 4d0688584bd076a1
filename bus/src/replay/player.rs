//! The replay loop: reads a source, keeps what the window holds, waits for each message's
//! intended time and hands it to the caller's publish function; reports each message's intended
//! and actual send time so the caller can measure the pacing error. Spins while waiting (a
//! replay owns its core); loops if asked; stops when told.
//!
//! A gap in the recording (a journal's gap record, a capture's hole) is published as a
//! [`FeedGap`] message (first sequence, count), at once and unpaced: subscribers of a replay
//! learn what the recording lacks, as subscribers of the live feed do, instead of meeting
//! silence.
use std::sync::atomic::{AtomicBool, Ordering};

use super::pace::{InWindow, Pace, Pacer, Window, DEFAULT_MAX_QUIET_NS};
use super::source::{ReplayError, Source};
use crate::time::Tsc;
use tickbus_codecs::md::FeedGap;
use tickbus_codecs::Message;
use zerocopy::IntoBytes;

/// What a replay did.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Played {
    /// Messages published.
    pub published: u64,
    /// Gaps met (what the recording itself lacks), each published as a `FeedGap` message.
    pub gap_records: u64,
    /// Messages before the window.
    pub skipped: u64,
    /// TSC of the first message's due time.
    pub first_tsc: u64,
    /// TSC of the last publish.
    pub last_tsc: u64,
    /// Steps of the recording's clock longer than the bound that were not waited out (see
    /// [`Pacer::with_max_quiet`]).
    pub cut_short: u64,
    /// The replay was stopped before the recording (or its window) ended: what is published is
    /// not all of it.
    pub stopped: bool,
}

/// Why a replay stopped early.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum PlayError {
    /// The recording could not be read.
    #[error(transparent)]
    Source(#[from] ReplayError),
    /// The publish callback failed (its error, kept whole).
    #[error("publishing: {0}")]
    Publish(#[source] PublishError),
}

/// A publish callback's error: the transport's own, boxed (off the hot path: it ends the replay).
pub type PublishError = Box<dyn std::error::Error + Send + Sync>;

/// Replays a source.
pub struct Player {
    source: Source,
    window: Window,
    pace: Pace,
    ticks_per_ns: f64,
    looping: bool,
    max_quiet_ns: u64,
}

impl Player {
    /// A player of `source` for the messages in `window`, at `pace`; `ticks_per_ns` converts the
    /// recording's times to TSC ticks, and `looping` starts over at the end.
    pub fn new(source: Source, window: Window, pace: Pace, ticks_per_ns: f64, looping: bool) -> Player {
        Player { source, window, pace, ticks_per_ns, looping, max_quiet_ns: DEFAULT_MAX_QUIET_NS }
    }

    /// Waits out steps of the recording's clock up to `ns` long, no longer (see
    /// [`DEFAULT_MAX_QUIET_NS`]).
    pub fn with_max_quiet(mut self, ns: u64) -> Player {
        self.max_quiet_ns = ns;
        self
    }

    /// The recording being replayed.
    pub fn source(&self) -> &Source {
        &self.source
    }

    /// Plays until the source (or the window) ends, or `stop` is set. `publish` sends one
    /// message (returning Ok(true) once it went out, Ok(false) if it gave up because `stop` was
    /// set; it may retry inside); `sent` hears each message's intended send time (None when
    /// pacing is `Max`) and the TSC right after it went out. A stop before the end is
    /// [`Played::stopped`] (with `looping`, a stop is how a replay ends, and is not that).
    pub fn run(
        &mut self,
        mut publish: impl FnMut(&[u8]) -> Result<bool, PublishError>,
        mut sent: impl FnMut(Option<u64>, u64, &Source),
        stop: &AtomicBool,
    ) -> Result<Played, PlayError> {
        let tsc = Tsc::new();
        let lead = (self.ticks_per_ns * 1e6) as u64; // 1 ms to get going
        let mut p = Played { first_tsc: tsc.now() + lead, ..Played::default() };
        p.last_tsc = p.first_tsc;
        let stopped = 'laps: loop {
            let mut pacer =
                Pacer::new(self.pace, self.ticks_per_ns, tsc.now() + lead).with_max_quiet(self.max_quiet_ns);
            loop {
                if stop.load(Ordering::Acquire) {
                    break 'laps true;
                }
                let Some(item) = self.source.next()? else { break };
                match self.window.place(item.sequence, item.time_ns) {
                    InWindow::Before => {
                        p.skipped += 1;
                        continue;
                    }
                    InWindow::After => break,
                    InWindow::In => {}
                }
                if let Some(count) = item.gap {
                    p.gap_records += 1;
                    let mut g = FeedGap::new();
                    (g.first_sequence, g.count) = (item.sequence, count);
                    g.header.flags |= tickbus_codecs::header::FLAG_RECORDING_GAP;
                    if !publish(g.as_bytes()).map_err(PlayError::Publish)? {
                        break 'laps true;
                    }
                    continue;
                }
                let before = pacer.cut_short();
                let due = pacer.intended(item.time_ns);
                p.cut_short += pacer.cut_short() - before;
                if let Some(due) = due {
                    while tsc.now() < due {
                        if stop.load(Ordering::Relaxed) {
                            break 'laps true; // a long quiet spell in the recording still stops at once
                        }
                        std::hint::spin_loop();
                    }
                }
                if !publish(item.payload).map_err(PlayError::Publish)? {
                    break 'laps true; // stopped while the stream was full: not published
                }
                let now = tsc.now();
                p.last_tsc = now;
                p.published += 1;
                sent(due, now, &self.source);
            }
            if !self.looping {
                break false;
            }
            self.source.rewind()?;
        };
        p.stopped = stopped && !self.looping;
        Ok(p)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::journal::{JournalMeta, JournalOptions, JournalWriter};
    use crate::replay::open;
    use zerocopy::FromBytes;

    /// The smallest recording with a hole: two messages around a gap of 3. The replay hands out
    /// message, gap, message, in that order: the gap as a FeedGap naming the missing sequences.
    #[test]
    fn a_gap_in_the_recording_is_published_as_a_feed_gap_in_its_place() {
        let dir = std::env::temp_dir().join(format!("tickbus-player-gap-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        let meta = JournalMeta { stream_id: 3, source: "test".into(), ticks_per_ns: 1.0 };
        let mut w = JournalWriter::open(&dir, meta, JournalOptions::default()).unwrap();
        w.append(0, 0, 1, b"first").unwrap();
        w.append_gap(1, 3, 2).unwrap();
        w.append(4, 0, 3, b"after").unwrap();
        w.close().unwrap();
        let mut player = Player::new(open(&dir, None, None).unwrap(), Window::default(), Pace::Max, 1.0, false);
        let mut got: Vec<Vec<u8>> = Vec::new();
        let played = player
            .run(
                |m| {
                    got.push(m.to_vec());
                    Ok(true)
                },
                |_, _, _| {},
                &AtomicBool::new(false),
            )
            .unwrap();
        let _ = std::fs::remove_dir_all(&dir);
        assert_eq!((played.published, played.gap_records), (2, 1));
        assert_eq!(got.len(), 3);
        assert_eq!((got[0].as_slice(), got[2].as_slice()), (&b"first"[..], &b"after"[..]));
        let g = FeedGap::parse(&got[1]).expect("a FeedGap message");
        assert_eq!((g.first_sequence, g.count), (1, 3));
        assert!(FeedGap::read_from_bytes(&got[1]).is_ok());
    }
}
