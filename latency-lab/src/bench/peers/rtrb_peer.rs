//! rtrb, the wait-free SPSC ring (in-process only): a byte ring written and read in `size`-byte
//! chunks, which is how a variable-size message travels through it.
use std::error::Error;

use rtrb::{Consumer, Producer, RingBuffer};

use crate::bench::peers::tickbus_shm::SLOTS;
use crate::bench::transport::{message, put_stamp, stamp_of, InProcess, Rx, Tx};

pub struct Rtrb;

pub struct RtrbTx(Producer<u8>, Vec<u8>);
pub struct RtrbRx(Consumer<u8>, Vec<u8>);

impl Tx for RtrbTx {
    #[inline]
    fn try_send(&mut self, stamp: u64) -> bool {
        put_stamp(&mut self.1, stamp);
        let Ok(mut chunk) = self.0.write_chunk(self.1.len()) else { return false };
        let (a, b) = chunk.as_mut_slices();
        a.copy_from_slice(&self.1[..a.len()]);
        b.copy_from_slice(&self.1[a.len()..]);
        chunk.commit_all();
        true
    }
}

impl Rx for RtrbRx {
    #[inline]
    fn try_recv(&mut self) -> Option<u64> {
        let chunk = self.0.read_chunk(self.1.len()).ok()?;
        let (a, b) = chunk.as_slices();
        self.1[..a.len()].copy_from_slice(a);
        self.1[a.len()..].copy_from_slice(b);
        chunk.commit_all();
        Some(stamp_of(&self.1))
    }
}

impl InProcess for Rtrb {
    type Tx = RtrbTx;
    type Rx = RtrbRx;
    fn name(&self) -> String {
        "rtrb 0.3 (in-process)".into()
    }
    fn note(&self) -> String {
        format!("byte ring of {SLOTS} messages, chunk write and read")
    }
    fn channel(&mut self, size: usize, _: f64) -> Result<(RtrbTx, RtrbRx), Box<dyn Error>> {
        let (p, c) = RingBuffer::new(SLOTS * size.max(8));
        Ok((RtrbTx(p, message(size)), RtrbRx(c, message(size))))
    }
}
