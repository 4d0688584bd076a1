//! The replay loop: reads a source, keeps what the window holds, waits for each message's
//! intended time and hands it to the caller's publish function; reports each message's intended
//! and actual send time so the caller can measure the pacing error. Spins while waiting (a
//! replay owns its core); loops if asked; stops when told.
use std::sync::atomic::{AtomicBool, Ordering};

use super::pace::{InWindow, Pace, Pacer, Window, DEFAULT_MAX_QUIET_NS};
use super::source::{ReplayError, Source};
use crate::time::Tsc;

/// What a replay did.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Played {
    /// Messages published.
    pub published: u64,
    /// Journal gap records met (what the recording itself lacks).
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
                if item.gap.is_some() {
                    p.gap_records += 1;
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
