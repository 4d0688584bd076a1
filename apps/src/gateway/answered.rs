//! What an earlier gateway already answered, read back from the report ring it published.
//!
//! A gateway publishes an order's report and only then releases the order on the order ring.
//! One that dies between the two leaves the order for the next gateway, which would answer it a
//! second time, against a book it has only begun to rebuild and with exec ids from 1 again: two
//! different final reports for one order. So a gateway starting on an existing report ring
//! first reads the reports the ring still holds (the last `RING_SLOTS`, far more than the one
//! order that can be answered and not released), skips the orders among them that come back,
//! and numbers its executions after the highest id it finds.
//!
//! Only shm: over RDMA the report stream is a new ring each connection, and the venue process
//! that restarts is the one whose memory is gone (the stream starts over; see ARCHITECTURE).
use std::collections::HashSet;

use tickbus::shm::{self, ShmOptions};
use tickbus::{Recv, StartAt};
use tickbus_codecs::{decode, AnyMessage};

/// The orders answered on a report ring, and the highest execution id used.
#[derive(Debug, Default)]
pub struct Answered {
    ids: HashSet<u64>,
    /// The highest exchange order id or exec id a report carries.
    pub last_exec_id: u64,
    /// Whether orders coming back may still be among `ids`: only the first ones can be (the
    /// order ring delivers in order), so the first order not among them closes the check.
    open: bool,
}

impl Answered {
    /// The reports the ring `name` still holds (none if it does not exist yet).
    pub fn on_ring(name: &str, opts: &ShmOptions) -> Result<Answered, String> {
        let mut s = match shm::open_observer_uncounted(name, StartAt::Oldest, opts) {
            Ok(s) => s,
            Err(e) if e.is_retryable() => return Ok(Answered::default()),
            Err(e) => return Err(format!("reading back report ring {name:?}: {e}")),
        };
        let mut a = Answered::default();
        while let Some(r) = s.try_recv() {
            if let Recv::Message(m) = r {
                a.note(m.payload);
            }
        }
        a.open = !a.ids.is_empty();
        Ok(a)
    }

    /// Takes one report's payload into account.
    pub fn note(&mut self, payload: &[u8]) {
        let (id, exec) = match decode(payload) {
            Ok(AnyMessage::ExecFill(f)) => (f.client_order_id, f.exec_id.max(f.exchange_order_id)),
            Ok(AnyMessage::ExecAck(a)) => (a.client_order_id, a.exchange_order_id),
            Ok(AnyMessage::ExecReject(r)) => (r.client_order_id, 0),
            _ => return,
        };
        self.ids.insert(id);
        self.last_exec_id = self.last_exec_id.max(exec);
    }

    /// Whether the order `client_order_id`, taken from the order ring now, was answered before
    /// (and so must not be again). No allocation: a look-up, and nothing once closed.
    #[inline]
    pub fn already(&mut self, client_order_id: u64) -> bool {
        if !self.open {
            return false;
        }
        let seen = self.ids.remove(&client_order_id);
        self.open = seen && !self.ids.is_empty();
        seen
    }

    /// Orders this gateway found answered on its ring.
    pub fn len(&self) -> usize {
        self.ids.len()
    }
}

#[cfg(test)]
mod tests {
    use tickbus_codecs::exec::{ExecAck, ExecFill};
    use tickbus_codecs::Message;
    use zerocopy::IntoBytes;

    use super::*;

    #[test]
    fn only_the_first_orders_back_can_have_been_answered_and_exec_ids_go_on() {
        let mut a = Answered::default();
        let mut f = ExecFill::new();
        (f.client_order_id, f.exec_id, f.exchange_order_id) = (41, 7, 7);
        a.note(f.as_bytes());
        let mut k = ExecAck::new();
        (k.client_order_id, k.exchange_order_id) = (42, 8);
        a.note(k.as_bytes());
        a.note(b"not a report");
        a.open = true;
        assert_eq!((a.len(), a.last_exec_id), (2, 8));
        assert!(a.already(41), "answered before it died: not again");
        assert!(!a.already(43), "a new order");
        assert!(!a.already(42), "after a new order, nothing later was answered before");
        assert!(!Answered::default().already(41));
    }
}
