//! A ring whose memory anyone may have written (a corrupt or hostile ring file, a hostile
//! RDMA peer): a valid geometry is built from the first bytes, the rest of the input overwrites
//! the header's producer and first consumer lines, then the slots from slot 0's window on (and,
//! if the first byte says so, the descriptor first), so an input of a few KiB reaches every
//! word of several slots: lead, payload, len and trail. Then
//! observers, a consumer and a writer attach and run, receiving in turn with `try_recv` and with
//! `try_recv_into` a buffer of a length the input picks (up to past the largest payload).
//! Nothing may panic or read out of bounds; a delivered payload is never longer than a slot
//! holds, and a length reported as another than the buffer's is one a slot can hold.
#![no_main]
use libfuzzer_sys::fuzz_target;
use tickbus::ring::{HeapMemory, RingMemory, RingReader, RingWriter};
use tickbus::{Mode, Recv, RecvInto, RingConfig, StartAt};

fuzz_target!(|data: &[u8]| {
    if data.len() < 4 {
        return;
    }
    let mode = if data[0] & 1 == 0 { Mode::Lossy } else { Mode::Reliable };
    let slots = 1usize << (1 + data[1] % 5);
    let payload = 8 + usize::from(data[2] % 4) * 40;
    let mut cfg = RingConfig::for_payload(mode, 9, payload, slots);
    cfg.max_consumers = 1 + usize::from(data[3] % 3);
    cfg.ticks_per_ns = 1.0;
    let mem = HeapMemory::new(cfg.ring_bytes());
    drop(RingWriter::create(mem.clone(), &cfg, 1, 0).expect("a valid config"));
    let skip_descriptor = data[0] & 2 == 0;
    let words = mem.len_words();
    // Header words 16..48 (producer line, consumer line 0), then the slot windows.
    let header_from = if skip_descriptor { 16 } else { 0 };
    let header = 48 - header_from;
    let first_window = tickbus::ring::layout::slot_window_offset(0, cfg.slot_size) / 8;
    for (i, chunk) in data[4..].chunks(8).enumerate() {
        let i = if i < header { header_from + i } else { first_window + (i - header) };
        if i >= words {
            break;
        }
        let mut w = [0u8; 8];
        w[..chunk.len()].copy_from_slice(chunk);
        // SAFETY: i < len_words of a live HeapMemory; nothing else touches it in this test.
        unsafe { &*mem.base().add(i) }.store(u64::from_le_bytes(w), std::sync::atomic::Ordering::Relaxed);
    }
    let max = cfg.max_payload();
    let mut buf = vec![0u8; usize::from(data[3]) % (max + 16)];
    // Every other poll receives into `buf`; a message of another length stays for `try_recv`.
    let mut poll = |r: &mut RingReader<std::sync::Arc<HeapMemory>>, k: usize| {
        if k % 2 == 1 {
            if let Some(RecvInto::OtherLength { len, .. }) = r.try_recv_into(&mut buf) {
                assert!(len <= max && len != buf.len());
            }
        } else if let Some(Recv::Message(m)) = r.try_recv() {
            assert!(m.payload.len() <= max);
        }
    };
    for start in [StartAt::Oldest, StartAt::Latest, StartAt::Position(u64::from(data[1]))] {
        if let Ok(mut r) = RingReader::observer(mem.clone(), start) {
            let _ = r.status();
            for k in 0..2 * slots {
                poll(&mut r, k);
            }
        }
    }
    if let Ok(mut c) = RingReader::consumer_by_token(mem.clone(), 5) {
        for k in 0..2 * slots {
            poll(&mut c, k);
        }
    }
    if let Ok(mut w) = RingWriter::attach(mem.clone(), 2) {
        for _ in 0..3 {
            let _ = w.publish(&[1; 8]);
        }
    }
});
