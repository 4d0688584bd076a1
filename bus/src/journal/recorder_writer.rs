//! A recorder's writer thread: takes the batches of records the poll side queued and hands them
//! to the journal as they are, flushing every `flush_bytes` and whenever the queue runs dry,
//! then publishing how far the journal holds the stream.
//!
//! Each batch comes with its shape ([`Batch`]): when all its records are messages of one size
//! with consecutive sequences (what a busy stream's polls give), the journal writes it as a run
//! ([`JournalWriter::append_run`]) without reading every record's header; any other batch is
//! walked record by record ([`JournalWriter::append_records`]).
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use super::error::JournalError;
use super::format::{self, MAX_PAYLOAD};
use super::recorder::{bump, RecorderStats};
use super::writer::JournalWriter;

/// What the poll side tells the writer thread of one batch it handed over, queued after the
/// batch's bytes. A batch is at most 64 KiB of records, or one record.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub(super) struct Batch {
    /// Bytes of records in the batch.
    pub(super) bytes: u32,
    /// When every record is a message of one size and their sequences follow one another: how
    /// many there are. 0: anything else (sizes differ, a gap record, a skipped position).
    pub(super) run: u32,
    /// The first record's sequence (when `run` is not 0).
    pub(super) first: u64,
}

/// Room for the batch descriptors a queue of `queue_bytes` can have in flight. The writer
/// releases a batch's descriptor before its bytes, so every descriptor queued names bytes still
/// in the byte queue, at least one record's (the smallest is `record_bytes(0)`): the
/// descriptor queue can never be full when the poll side hands a batch over.
pub(super) fn batches_for(queue_bytes: usize) -> usize {
    queue_bytes / format::record_bytes(0) + 1
}

/// The writer thread's loop.
pub(super) fn write_loop(
    mut journal: JournalWriter,
    mut queue: rtrb::Consumer<u8>,
    mut batches: rtrb::Consumer<Batch>,
    stats: &RecorderStats,
    stop: &AtomicBool,
    flush_bytes: usize,
) -> Result<(), JournalError> {
    let mut wrapped: Vec<u8> = vec![0; format::record_bytes(MAX_PAYLOAD)];
    let mut unflushed = 0usize;
    loop {
        let stopping = stop.load(Ordering::Acquire);
        // The batches described so far; their bytes were committed before their descriptors
        // were, so all of them are readable.
        let described = batches.slots();
        if described > 0 {
            let shapes = batches.read_chunk(described).expect("that many are readable");
            let chunk = queue.read_chunk(queue.slots()).expect("that many are readable");
            let (a, b) = chunk.as_slices();
            let (x, y) = shapes.as_slices();
            let (mut used, mut records) = (0usize, 0u64);
            // Batches that continue one another are written as one: one write of everything
            // readable (which the kernel takes straight from the queue), not one per batch
            // through the journal's buffer.
            let mut span: Option<Span> = None;
            for batch in x.iter().chain(y) {
                if span.as_mut().is_some_and(|s| s.extend(batch)) {
                    continue;
                }
                if let Some(s) = span.replace(Span::of(batch)) {
                    records += write_span(&mut journal, a, b, used, &s, &mut wrapped)?;
                    used += s.bytes;
                }
            }
            if let Some(s) = span {
                records += write_span(&mut journal, a, b, used, &s, &mut wrapped)?;
                used += s.bytes;
            }
            // Descriptors first: see `batches_for`.
            shapes.commit_all();
            chunk.commit(used);
            unflushed += used;
            bump(&stats.records, records);
        }
        if unflushed > 0 && (unflushed >= flush_bytes || batches.is_empty()) {
            journal.flush()?;
            unflushed = 0;
            if let Some(next) = journal.next_sequence() {
                stats.written.store(next, Ordering::Release);
            }
        } else if described == 0 && stopping {
            return journal.close();
        } else if described == 0 {
            journal.sync_if_due()?; // a quiet stream still gets its interval's fsync
            std::thread::sleep(Duration::from_micros(200));
        }
    }
}

/// Batches back to back in the queue, written at once.
struct Span {
    bytes: usize,
    /// Records of one size with consecutive sequences, as [`Batch::run`] (0: walk them).
    run: usize,
    first: u64,
}

impl Span {
    fn of(b: &Batch) -> Span {
        Span { bytes: b.bytes as usize, run: b.run as usize, first: b.first }
    }

    /// Takes in the next batch if the span stays a run (records of the same size, the first
    /// at the sequence after the span's last), or if neither is one (both are walked).
    fn extend(&mut self, b: &Batch) -> bool {
        let next = Span::of(b);
        let continues = self.run != 0
            && next.run != 0
            && next.bytes * self.run == self.bytes * next.run
            && next.first == self.first + self.run as u64;
        if continues || (self.run == 0 && next.run == 0) {
            self.bytes += next.bytes;
            self.run += next.run;
            return true;
        }
        false
    }
}

/// Writes the span at `at` of the queue's readable bytes (`a`, then `b`); returns its records.
fn write_span(
    journal: &mut JournalWriter,
    a: &[u8],
    b: &[u8],
    at: usize,
    s: &Span,
    wrapped: &mut [u8],
) -> Result<u64, JournalError> {
    let Some((pa, pb)) = part(a, b, at, s.bytes) else {
        return Err(JournalError::Queued { why: "a batch's bytes are not in the queue" });
    };
    if s.run == 0 {
        return write_walked(journal, pa, pb, wrapped);
    }
    write_run(journal, pa, pb, s.run, s.first, wrapped)
}

/// The bytes `[at, at + n)` of the queue's readable bytes (`a`, then `b` where they wrap), as
/// the part in `a` and the part in `b`; None past the readable bytes.
fn part<'q>(a: &'q [u8], b: &'q [u8], at: usize, n: usize) -> Option<(&'q [u8], &'q [u8])> {
    let end = at.checked_add(n).filter(|&e| e <= a.len() + b.len())?;
    Some(if end <= a.len() {
        (&a[at..end], &[][..])
    } else if at >= a.len() {
        (&b[at - a.len()..end - a.len()], &[][..])
    } else {
        (&a[at..], &b[..end - a.len()])
    })
}

/// Appends `count` records of one size with sequences from `first` (`a`, then `b` where the
/// queue's wrap cut them); the record cut by the wrap, if any, is joined in `wrapped` first.
/// Returns the records written.
fn write_run(
    journal: &mut JournalWriter,
    a: &[u8],
    b: &[u8],
    count: usize,
    first: u64,
    wrapped: &mut [u8],
) -> Result<u64, JournalError> {
    let total = a.len() + b.len();
    let rec = total / count;
    if rec * count != total || rec > wrapped.len() {
        return Err(JournalError::Queued { why: "a batch is not its run's records" });
    }
    let in_a = a.len() / rec * rec;
    journal.append_run(&a[..in_a], first, rec)?;
    let mut next = first + (in_a / rec) as u64;
    let cut = &a[in_a..];
    let rest = if cut.is_empty() {
        b
    } else {
        let (whole, tail) = join(cut, b, rec, wrapped);
        journal.append_run(whole, next, rec)?;
        next += 1;
        tail
    };
    journal.append_run(rest, next, rec)?;
    Ok(count as u64)
}

/// A batch of any records, walked: every record's header read and checked. The batch must end
/// with a whole record.
fn write_walked(journal: &mut JournalWriter, a: &[u8], b: &[u8], wrapped: &mut [u8]) -> Result<u64, JournalError> {
    let before = journal.records();
    let in_a = journal.append_whole(a)?;
    let cut = &a[in_a..];
    let rest = if cut.is_empty() {
        b
    } else {
        // A record starts in `a` and ends in `b`.
        let mut head = [0u8; 4];
        for (i, byte) in head.iter_mut().enumerate() {
            *byte = *cut.get(i).or_else(|| b.get(i - cut.len())).unwrap_or(&0);
        }
        let n = format::record_bytes(u32::from_le_bytes(head) as usize);
        if cut.len() + b.len() < n || n > wrapped.len() {
            return Err(JournalError::Queued { why: "the last record of a batch is cut short" });
        }
        let (whole, tail) = join(cut, b, n, wrapped);
        journal.append_records(whole)?;
        tail
    };
    journal.append_records(rest)?;
    Ok(journal.records() - before)
}

/// The record of `n` bytes that the queue's wrap cut in two (`cut` ends `a`, the rest starts
/// `b`), joined whole in `wrapped`; and the bytes of `b` after it. `b` holds the rest.
fn join<'w, 'q>(cut: &[u8], b: &'q [u8], n: usize, wrapped: &'w mut [u8]) -> (&'w [u8], &'q [u8]) {
    let (head, tail) = b.split_at(n - cut.len());
    wrapped[..cut.len()].copy_from_slice(cut);
    wrapped[cut.len()..n].copy_from_slice(head);
    (&wrapped[..n], tail)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn batch(bytes: u32, run: u32, first: u64) -> Batch {
        Batch { bytes, run, first }
    }

    #[test]
    fn a_span_stays_a_run_only_while_the_next_batch_continues_it() {
        let mut s = Span::of(&batch(480, 10, 100));
        assert!(s.extend(&batch(144, 3, 110)), "same size, the next sequence");
        assert_eq!((s.bytes, s.run, s.first), (624, 13, 100));
        for (why, b) in [
            ("a later sequence", batch(48, 1, 114)),
            ("an earlier one", batch(48, 1, 112)),
            ("another size", batch(160, 2, 113)),
            ("a batch to walk", batch(48, 0, 0)),
        ] {
            assert!(!s.extend(&b), "{why}");
        }
        assert_eq!((s.bytes, s.run), (624, 13), "a refused batch changes nothing");
        // Batches to walk are walked together.
        let mut w = Span::of(&batch(100, 0, 0));
        assert!(w.extend(&batch(60, 0, 0)));
        assert!(!w.extend(&batch(48, 1, 7)), "a run after them is written on its own");
        assert_eq!((w.bytes, w.run), (160, 0));
    }

    #[test]
    fn a_part_of_the_queue_is_cut_where_it_wraps_and_never_read_past() {
        let (a, b) = ([1u8; 10], [2u8; 6]);
        assert_eq!(part(&a, &b, 2, 5), Some((&a[2..7], &[][..])));
        assert_eq!(part(&a, &b, 8, 4), Some((&a[8..], &b[..2])));
        assert_eq!(part(&a, &b, 10, 6), Some((&b[..], &[][..])));
        assert_eq!(part(&a, &b, 12, 5), None);
        assert_eq!(part(&a, &b, usize::MAX, 2), None);
    }
}
