//! The recorder as an [`Agent`]: each duty cycle takes up to a batch from its tap, so a
//! recording can share a thread with other agents ([`crate::agent::Composite`]) or run on an
//! [`crate::agent::AgentRunner`], as `tickbus record` runs it on its own thread.
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;

use super::recorder::{RecordError, Recorder, Tap};
use crate::agent::Agent;

/// Messages taken per duty cycle at most (the rest wait for the next cycle, so a fast stream
/// never starves the agents that share the thread).
pub const RECORD_BATCH: usize = 256;

/// A [`Recorder`] and its tap as an agent. A recording error ends it: the error is kept for
/// [`RecorderAgent::finish`], nothing more is taken, and `stop` is stored so its runner ends.
pub struct RecorderAgent<T: Tap + Send> {
    rec: Option<Recorder>,
    tap: T,
    error: Option<RecordError>,
    stop: Arc<AtomicBool>,
}

impl<T: Tap + Send> RecorderAgent<T> {
    /// Records from `tap` through `rec`; stores `stop` if recording fails.
    pub fn new(rec: Recorder, tap: T, stop: Arc<AtomicBool>) -> RecorderAgent<T> {
        RecorderAgent { rec: Some(rec), tap, error: None, stop }
    }

    /// The tap (its position, whether it is reliable).
    pub fn tap(&self) -> &T {
        &self.tap
    }

    /// The recorder, while it runs (its statistics).
    pub fn recorder(&self) -> Option<&Recorder> {
        self.rec.as_ref()
    }

    /// Ends the recording: the first error it met, else [`Recorder::finish`] (everything taken
    /// is written, and released from a reliable tap). Returns the tap.
    pub fn finish(mut self) -> Result<T, RecordError> {
        if let Some(e) = self.error.take() {
            return Err(e);
        }
        if let Some(rec) = self.rec.take() {
            rec.finish(&mut self.tap)?;
        }
        Ok(self.tap)
    }
}

impl<T: Tap + Send> Agent for RecorderAgent<T> {
    fn name(&self) -> &str {
        "recorder"
    }

    fn uses_clock(&self) -> bool {
        false // the recorder stamps what it takes with its own reads
    }

    fn do_work(&mut self, _now: u64) -> usize {
        let Some(rec) = self.rec.as_mut() else { return 0 };
        match rec.poll(&mut self.tap, RECORD_BATCH) {
            Ok(n) => n,
            Err(e) => {
                self.error = Some(e);
                self.rec = None;
                self.stop.store(true, Ordering::Release);
                0
            }
        }
    }
}
