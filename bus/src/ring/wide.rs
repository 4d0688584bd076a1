//! Payload stores and loads 16 bytes at a time that still count, in Rust's memory model, as
//! relaxed atomic 8-byte stores and loads: the writer's copy-in and an observer's copy-out
//! without a loop of one word per instruction.
//!
//! Why: a slot's payload words are stored with relaxed atomics so a lapped reader racing the
//! writer is not undefined behaviour, but LLVM never merges or vectorises atomic stores. At
//! 1344 B that is 168 scalar stores where an AVX-512 `memcpy` does 21; in the lab's ping-pong the word loop
//! cost about 15-20% of the round trip against the same-payload floor (the same build with a
//! plain `memcpy`, which is not sound beside lapped readers, closed that gap).
//!
//! How it stays sound: the copy is inline assembly whose hardware behaviour is one that the
//! Rust code it replaces (relaxed `AtomicU64` stores, one per word) could also have. Each store is
//! a 16-byte-aligned `vmovdqa` (VEX.128), which the Intel and AMD manuals guarantee is single-copy atomic on
//! every processor that enumerates AVX; a reader's 8-byte atomic load of either half therefore
//! sees the old or the new word, never a mix, exactly as if the two halves had been stored one
//! after the other with nothing in between (and a 16-byte load sees what two 8-byte loads with
//! nothing in between would). Without AVX, where the ring side is not 16-byte aligned (slots of
//! at most 128 bytes on line-aligned memory, whose payload starts 8 bytes in), or under loom, the word loop runs
//! instead. Wider (32- or 64-byte) vector accesses would be faster still, but no manual promises
//! they do not tear inside a word.
//!
//! Loom models the word loop, not this assembly: its correctness rests on the hardware argument
//! above and on the tests below, which check every length byte for byte.
use super::sync::{AtomicU64, Ordering};

/// Asks the CPU once whether it has AVX, so the hot path only reads std's cached answer (the
/// first question is a CPUID, which a hypervisor may trap). Called when a ring is attached.
#[inline]
pub(crate) fn detect() {
    #[cfg(all(target_arch = "x86_64", not(loom)))]
    let _ = std::arch::is_x86_feature_detected!("avx");
}

/// Stores `payload` into `words` as whole little-endian words, the last one zero-padded.
/// `payload` must fit: `payload.len() <= 8 * words.len()` (the writer's `check_room`, for publish
/// and claims alike, checks it against the slot's max payload; this asserts it again, as the bounds of the unsafe copy).
#[inline(always)]
pub(crate) fn store(words: &[AtomicU64], payload: &[u8]) {
    assert!(payload.len() <= words.len() * 8, "{} payload bytes for {} words", payload.len(), words.len());
    let done = store_pairs(words, payload);
    store_words(&words[done / 8..], &payload[done..]);
}

/// The word loop: whole words, then the zero-padded tail built in a register (no `memcpy` call
/// through a stack buffer), off the straight line of a whole-word payload.
#[inline(always)]
pub(crate) fn store_words(words: &[AtomicU64], payload: &[u8]) {
    let whole = payload.len() / 8;
    let words = &words[..payload.len().div_ceil(8)];
    for (i, c) in payload.chunks_exact(8).enumerate() {
        words[i].store(u64::from_le_bytes([c[0], c[1], c[2], c[3], c[4], c[5], c[6], c[7]]), Ordering::Relaxed);
    }
    let rest = &payload[whole * 8..];
    if !rest.is_empty() {
        // Out of the straight line: fixed-layout messages are whole words.
        std::hint::cold_path();
        let last = rest.iter().rev().fold(0u64, |acc, b| (acc << 8) | u64::from(*b));
        words[whole].store(last, Ordering::Relaxed);
    }
}

/// Loads `out.len()` words from `words` (at least that many) into `out`, as relaxed atomic loads.
#[inline(always)]
pub(crate) fn load(words: &[AtomicU64], out: &mut [u64]) {
    assert!(out.len() <= words.len(), "{} words out of {}", out.len(), words.len());
    let done = load_pairs(words, out);
    for (o, w) in out[done..].iter_mut().zip(&words[done..]) {
        *o = w.load(Ordering::Relaxed);
    }
}

/// Whether a 16-byte `vmovdqa` at `p` is single-copy atomic: `p` 16-byte aligned, on a CPU with
/// AVX (std's cached answer: [`detect`] asked at attach).
#[cfg(all(target_arch = "x86_64", not(loom)))]
#[inline(always)]
fn atomic_16(p: *const u8) -> bool {
    (p as usize).is_multiple_of(16) && std::arch::is_x86_feature_detected!("avx")
}

/// Stores the payload's whole 16-byte pairs of words with `vmovdqa` where that is an atomic 16-byte
/// store (AVX, aligned destination); returns how many bytes it stored (a multiple of 16; 0 if it
/// could not).
#[cfg(all(target_arch = "x86_64", not(loom)))]
#[inline(always)]
fn store_pairs(words: &[AtomicU64], payload: &[u8]) -> usize {
    let pairs = payload.len() / 16;
    assert!(pairs * 2 <= words.len(), "{pairs} pairs of words into {} words", words.len());
    let dst = words.as_ptr() as *mut u8;
    if pairs == 0 || !atomic_16(dst) {
        return 0;
    }
    // SAFETY: `pairs * 16 <= payload.len()` and `2 * pairs <= words.len()` (asserted), so every
    // load stays inside `payload` and every store inside `words`; `dst` is 16-byte aligned
    // (checked), as `vmovdqa` needs. The words are atomics that others only touch atomically (the
    // RingMemory contract), and each `vmovdqa` (VEX.128) is a single-copy-atomic 16-byte store on AVX
    // processors (checked above), so the block behaves as relaxed atomic stores of those words
    // (module doc). It clobbers only its named operands and the flags, and uses no stack.
    unsafe {
        core::arch::asm!(
            // Four pairs (a line) per turn, then what is left one pair at a time.
            "test {lines}, {lines}",
            "jz 3f",
            "2:",
            "vmovdqu {a}, xmmword ptr [{src}]",
            "vmovdqu {b}, xmmword ptr [{src} + 16]",
            "vmovdqu {c}, xmmword ptr [{src} + 32]",
            "vmovdqu {d}, xmmword ptr [{src} + 48]",
            "vmovdqa xmmword ptr [{dst}], {a}",
            "vmovdqa xmmword ptr [{dst} + 16], {b}",
            "vmovdqa xmmword ptr [{dst} + 32], {c}",
            "vmovdqa xmmword ptr [{dst} + 48], {d}",
            "add {src}, 64",
            "add {dst}, 64",
            "dec {lines}",
            "jnz 2b",
            "3:",
            "test {rest}, {rest}",
            "jz 5f",
            "4:",
            "vmovdqu {a}, xmmword ptr [{src}]",
            "vmovdqa xmmword ptr [{dst}], {a}",
            "add {src}, 16",
            "add {dst}, 16",
            "dec {rest}",
            "jnz 4b",
            "5:",
            src = inout(reg) payload.as_ptr() => _,
            dst = inout(reg) dst => _,
            lines = inout(reg) pairs / 4 => _,
            rest = inout(reg) pairs % 4 => _,
            a = out(xmm_reg) _,
            b = out(xmm_reg) _,
            c = out(xmm_reg) _,
            d = out(xmm_reg) _,
            options(nostack),
        );
    }
    pairs * 16
}

#[cfg(not(all(target_arch = "x86_64", not(loom))))]
#[inline(always)]
fn store_pairs(_: &[AtomicU64], _: &[u8]) -> usize {
    0
}

/// Loads whole 16-byte pairs of words with `vmovdqa` where that is an atomic 16-byte load (AVX,
/// aligned source); returns how many words it loaded (even; 0 if it could not).
#[cfg(all(target_arch = "x86_64", not(loom)))]
#[inline(always)]
fn load_pairs(words: &[AtomicU64], out: &mut [u64]) -> usize {
    let pairs = out.len() / 2;
    assert!(pairs * 2 <= words.len(), "{pairs} pairs of words out of {} words", words.len());
    let src = words.as_ptr() as *const u8;
    if pairs == 0 || !atomic_16(src) {
        return 0;
    }
    // SAFETY: `2 * pairs <= out.len()` and `2 * pairs <= words.len()` (asserted), so every load
    // stays inside `words` and every store inside `out`, which we hold exclusively; `src` is
    // 16-byte aligned (checked), as `vmovdqa` needs, and each `vmovdqa` is a single-copy-atomic 16-byte
    // load on AVX processors (checked), so the block behaves as relaxed atomic loads of those
    // words (module doc). It clobbers only its named operands and the flags, and uses no stack.
    unsafe {
        core::arch::asm!(
            "2:",
            "vmovdqa {a}, xmmword ptr [{src}]",
            "vmovdqu xmmword ptr [{dst}], {a}",
            "add {src}, 16",
            "add {dst}, 16",
            "dec {n}",
            "jnz 2b",
            src = inout(reg) src => _,
            dst = inout(reg) out.as_mut_ptr() => _,
            n = inout(reg) pairs => _,
            a = out(xmm_reg) _,
            options(nostack),
        );
    }
    pairs * 2
}

#[cfg(not(all(target_arch = "x86_64", not(loom))))]
#[inline(always)]
fn load_pairs(_: &[AtomicU64], _: &mut [u64]) -> usize {
    0
}

#[cfg(all(test, not(loom)))]
mod tests {
    use super::*;

    /// Every length from 0 to 200 bytes, at an aligned and a misaligned destination, stores
    /// exactly the payload's bytes, zero-pads the last word, and touches no word beyond it.
    #[test]
    fn stores_every_length_exactly_and_nothing_past_it() {
        let payload: Vec<u8> = (0..200u32).map(|i| (i * 7 + 3) as u8).collect();
        for offset in [0usize, 1] {
            for len in 0..=200 {
                // 32 words of sentinel, 16-byte aligned at word 0 (a Vec of u64-sized words
                // promises only 8-byte alignment, so align by hand inside a larger buffer).
                let buf: Vec<AtomicU64> = (0..40).map(|_| AtomicU64::new(u64::MAX)).collect();
                let first = (0..2).find(|k| (buf[*k..].as_ptr() as usize).is_multiple_of(16)).unwrap() + offset;
                let words = &buf[first..first + 32];
                store(words, &payload[..len]);
                let got: Vec<u8> = words.iter().flat_map(|w| w.load(Ordering::Relaxed).to_le_bytes()).collect();
                assert_eq!(&got[..len], &payload[..len], "len {len}, offset {offset}");
                let padded = len.div_ceil(8) * 8;
                assert!(got[len..padded].iter().all(|b| *b == 0), "len {len}: tail word not zero-padded");
                assert!(got[padded..].iter().all(|b| *b == 0xFF), "len {len}, offset {offset}: wrote past the payload");
            }
        }
    }

    /// On a machine with AVX an aligned destination takes the 16-byte path (the lab's machines
    /// have it), so the test above covers the assembly and not only the word loop.
    #[cfg(target_arch = "x86_64")]
    #[test]
    fn an_aligned_destination_takes_the_sixteen_byte_path_where_there_is_avx() {
        let buf: Vec<AtomicU64> = (0..8).map(|_| AtomicU64::new(0)).collect();
        let first = (0..2).find(|k| (buf[*k..].as_ptr() as usize).is_multiple_of(16)).unwrap();
        let want = if std::arch::is_x86_feature_detected!("avx") { 32 } else { 0 };
        assert_eq!(store_pairs(&buf[first..first + 6], &[9u8; 40]), want);
        assert_eq!(store_pairs(&buf[first + 1..first + 7], &[9u8; 40]), 0, "misaligned must fall back");
    }

    /// Every word count from 0 to 25, from an aligned and a misaligned source, loads exactly
    /// those words and writes nothing past them in the output.
    #[test]
    fn loads_every_length_exactly_and_nothing_past_it() {
        let buf: Vec<AtomicU64> = (0..40u64).map(|i| AtomicU64::new(i * 0x0101_0101_0101 + 5)).collect();
        let first = (0..2).find(|k| (buf[*k..].as_ptr() as usize).is_multiple_of(16)).unwrap();
        for offset in [0usize, 1] {
            let words = &buf[first + offset..first + offset + 32];
            for n in 0..=25 {
                let mut out = vec![u64::MAX; 32];
                load(words, &mut out[..n]);
                for (k, o) in out.iter().enumerate() {
                    let want = if k < n { words[k].load(Ordering::Relaxed) } else { u64::MAX };
                    assert_eq!(*o, want, "n {n}, offset {offset}, word {k}");
                }
            }
        }
        #[cfg(target_arch = "x86_64")]
        {
            let want = if std::arch::is_x86_feature_detected!("avx") { 4 } else { 0 };
            assert_eq!(load_pairs(&buf[first..first + 8], &mut [0u64; 5]), want);
            assert_eq!(load_pairs(&buf[first + 1..first + 9], &mut [0u64; 5]), 0, "misaligned must fall back");
        }
    }

    #[test]
    #[should_panic(expected = "payload bytes for")]
    fn refuses_a_payload_larger_than_its_words() {
        let words: Vec<AtomicU64> = (0..2).map(|_| AtomicU64::new(0)).collect();
        store(&words, &[1u8; 17]);
    }
}
