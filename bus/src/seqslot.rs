//! A slot that a remote reader copies out whole with one RDMA READ, validated like the ring's
//! seqlock but mirrored: ud-mcast subscribers READ lost messages straight out of the
//! publisher's send slots while the publisher may be rewriting them.
//!
//! ```text
//!  word 0            valid = seq + 1, stored LAST (Release)
//!  words 1 ..        the frame, as whole words (Relaxed stores)
//!  last word         lead = seq + 1, stored FIRST (Relaxed, then a Release fence)
//! ```
//! One READ copies memory in ascending address order (rxe does, NICs do; the spec does not
//! promise it, like rdma-rc's in-order WRITE placement), so the word stored last is copied
//! first and the word stored first is copied last: a copy that caught a rewrite shows
//! `valid != lead` and is refused. The fence after `lead` matters: a Release *store* of lead
//! would only order what came before it, letting the frame's stores move ahead of it (and a
//! copy with both ends old but a new frame would pass); the fence keeps them behind it. The
//! loom model below checks exactly that, with a CPU thread reading in ascending order in place
//! of the NIC.
//!
//! Owns: the order of stores into a slot and the check of a copy. Never: allocates or makes a
//! syscall (the publisher writes slots on its hot path).
use crate::ring::sync::{fence, AtomicU64, Ordering};

/// Words of slot overhead: valid and lead.
pub(crate) const OVERHEAD_WORDS: usize = 2;

/// Writes the frame `head ++ body` for `seq` into `slot` in the order above. `head` is a whole
/// number of words; both together fit between the two validity words (callers size slots for
/// their MTU; a frame that does not fit is a bug and panics before anything is stored).
#[inline]
pub(crate) fn write(slot: &[AtomicU64], seq: u64, head: &[u8], body: &[u8]) {
    let frame_words = slot.len() - OVERHEAD_WORDS;
    assert!(head.len().is_multiple_of(8), "the frame header is whole words");
    assert!(head.len() + body.len() <= frame_words * 8, "a frame larger than its slot");
    let stamp = seq.wrapping_add(1);
    slot[slot.len() - 1].store(stamp, Ordering::Relaxed);
    fence(Ordering::Release);
    let words = &slot[1..slot.len() - 1];
    let mut out = words.iter();
    for (c, w) in head.chunks_exact(8).chain(body.chunks_exact(8)).zip(&mut out) {
        w.store(u64::from_le_bytes(c.try_into().expect("8 bytes")), Ordering::Relaxed);
    }
    let rest = body.chunks_exact(8).remainder();
    if !rest.is_empty() {
        let mut last = [0u8; 8];
        last[..rest.len()].copy_from_slice(rest);
        if let Some(w) = out.next() {
            w.store(u64::from_le_bytes(last), Ordering::Relaxed);
        }
    }
    slot[0].store(stamp, Ordering::Release);
}

/// The frame bytes of a copied slot if the copy is an intact one of `seq` (both validity words
/// say so), else None.
pub(crate) fn check(copy: &[u8], seq: u64) -> Option<&[u8]> {
    let n = copy.len();
    if n < OVERHEAD_WORDS * 8 || !n.is_multiple_of(8) {
        return None;
    }
    let word = |at: usize| u64::from_le_bytes(copy[at..at + 8].try_into().expect("8 bytes"));
    let stamp = seq.wrapping_add(1);
    (word(0) == stamp && word(n - 8) == stamp).then(|| &copy[8..n - 8])
}

#[cfg(all(test, not(loom)))]
mod tests {
    use super::*;

    fn slot(words: usize) -> Vec<AtomicU64> {
        (0..words).map(|_| AtomicU64::new(0)).collect()
    }

    fn bytes(s: &[AtomicU64]) -> Vec<u8> {
        s.iter().flat_map(|w| w.load(Ordering::Relaxed).to_le_bytes()).collect()
    }

    #[test]
    fn a_written_slot_checks_as_its_sequence_only_and_holds_the_frame() {
        let s = slot(8);
        write(&s, 41, &[1; 16], b"hello");
        let copy = bytes(&s);
        let frame = check(&copy, 41).expect("intact");
        assert_eq!(&frame[..16], &[1; 16]);
        assert_eq!(&frame[16..21], b"hello");
        assert!(check(&copy, 40).is_none());
        let mut torn = copy.clone();
        torn[56] ^= 1; // lead from another write
        assert!(check(&torn, 41).is_none());
        assert!(check(&copy[..8], 41).is_none());
    }

    #[test]
    #[should_panic(expected = "larger than its slot")]
    fn a_frame_larger_than_its_slot_is_refused_before_any_store() {
        write(&slot(4), 1, &[0; 8], &[0; 9]);
    }
}

/// Loom: a publisher rewrites a slot (seq 0, then seq 2 reusing it) while a reader copies it
/// word by word in ascending address order, as the NIC's READ does. A copy that passes the
/// check always holds exactly that sequence's frame.
#[cfg(all(test, loom))]
mod loom_tests {
    use super::*;
    use loom::sync::Arc;

    #[test]
    fn loom_a_copy_that_checks_is_never_torn() {
        let mut b = loom::model::Builder::new();
        b.preemption_bound = Some(3);
        b.check(|| {
            let s: Arc<Vec<AtomicU64>> = Arc::new((0..4).map(|_| AtomicU64::new(0)).collect());
            write(&s, 0, &[], &[0xA0; 16]);
            let w = s.clone();
            let t = loom::thread::spawn(move || write(&w, 2, &[], &[0xB2; 16]));
            let copy: Vec<u8> = s.iter().flat_map(|w| w.load(Ordering::Acquire).to_le_bytes()).collect();
            for (seq, fill) in [(0u64, 0xA0u8), (2, 0xB2)] {
                if let Some(frame) = check(&copy, seq) {
                    assert!(frame.iter().all(|b| *b == fill), "torn copy of seq {seq}: {frame:?}");
                }
            }
            t.join().unwrap();
        });
    }
}
