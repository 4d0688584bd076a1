//! [`Tap`] for every stream subscriber, through the one stream API: a recorder records any
//! transport (and any URI opened at run time, as `AnySubscriber`) with the same code.
use super::recorder::{Taken, Tap};
use crate::ring::{Recv, RingMemory};
use crate::stream::{Retry, Subscribe};
use crate::Subscriber;

/// One take from any subscriber: positions a ring reader moved past without a message (dropped
/// claims: a lap is reported as a Gap instead) are handed over as `Aborted`, then what it
/// delivered. Only ring readers (a window of slots) skip in silence: a ud-mcast member's first
/// message is at whatever sequence it joined at, and every loss after it comes as a Gap. A
/// retryable error (one foreign datagram dropped by a ud-mcast subscriber) is something taken:
/// the recorder polls on.
fn take<S: Subscribe>(s: &mut S, f: &mut dyn FnMut(Taken<'_>)) -> Result<bool, super::recorder::SourceError> {
    s.set_manual_release(true);
    let (before, ring) = (s.position(), s.window() > 0);
    match s.try_recv() {
        Ok(Some(r)) => {
            if let Recv::Message(m) = &r {
                if ring && m.position > before {
                    f(Taken::Aborted { from: before, to: m.position });
                }
            }
            f(match r {
                Recv::Message(m) => Taken::Message { position: m.position, payload: m.payload },
                Recv::Gap(g) => Taken::Gap { from: g.expected, to: g.resumed_at },
            });
            Ok(true)
        }
        Ok(None) => Ok(false),
        Err(e) if e.retry_helps() => Ok(true),
        Err(e) => Err(Box::new(e)),
    }
}

/// `Tap` for a subscriber type, by its `Subscribe` impl.
macro_rules! tap_by_subscribe {
    ($($(#[$m:meta])* [$($g:tt)*] $t:ty),* $(,)?) => {$(
        $(#[$m])*
        impl<$($g)*> Tap for $t {
            fn take(&mut self, f: &mut dyn FnMut(Taken<'_>)) -> Result<bool, super::recorder::SourceError> {
                take(self, f)
            }
            fn reliable(&self) -> bool {
                Subscribe::reliability(self) == crate::stream::Reliability::Reliable
            }
            fn release_to(&mut self, position: u64) {
                Subscribe::release_to(self, position)
            }
            fn position(&self) -> u64 {
                Subscribe::position(self)
            }
            fn max_payload(&self) -> usize {
                Subscribe::max_payload(self)
            }
            fn window(&self) -> u64 {
                Subscribe::window(self)
            }
            fn aborted(&self) -> u64 {
                Subscribe::aborted(self)
            }
            fn source_id(&self) -> Option<u64> {
                Subscribe::source_id(self)
            }
        }
    )*};
}

tap_by_subscribe!(
    [M: RingMemory] Subscriber<M>,
    [] crate::shm::ShmSubscriber,
    [] crate::stream::AnySubscriber,
    #[cfg(feature = "rdma")] [] crate::rdma::RdmaSubscriber,
    #[cfg(feature = "rdma")] [] crate::mcast::McastSubscriber,
);

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ring::{Delivery, RecvInto};
    use crate::stream::Reliability;

    /// A stream that joins mid-way (as a ud-mcast member does): position 0 before its first
    /// message, which is at sequence 100.
    struct JoinsLate {
        given: bool,
        window: u64,
    }

    impl Subscribe for JoinsLate {
        type Error = core::convert::Infallible;
        fn try_recv(&mut self) -> Result<Option<Recv<'_>>, Self::Error> {
            let first = !std::mem::replace(&mut self.given, true);
            Ok(first.then_some(Recv::Message(Delivery { position: 100, payload: &[1; 8] })))
        }
        fn try_recv_into(&mut self, _: &mut [u8]) -> Result<Option<RecvInto>, Self::Error> {
            Ok(None)
        }
        fn position(&self) -> u64 {
            if self.given {
                101
            } else {
                0
            }
        }
        fn missed(&self) -> u64 {
            0
        }
        fn max_payload(&self) -> usize {
            8
        }
        fn reliability(&self) -> Reliability {
            Reliability::Lossy
        }
        fn ticks_per_ns(&self) -> f64 {
            1.0
        }
        fn set_manual_release(&mut self, _: bool) -> bool {
            false
        }
        fn release_to(&mut self, _: u64) {}
        fn window(&self) -> u64 {
            self.window
        }
    }

    fn taken(s: &mut JoinsLate) -> Vec<String> {
        let mut got = Vec::new();
        take(s, &mut |t| got.push(format!("{t:?}"))).unwrap();
        got
    }

    /// From the review: the generic tap took a ud-mcast member's first message (joined at 100)
    /// for 100 positions of dropped claims; a restarted recorder then recorded no gap before it.
    /// A live feed with no window hands over the message only; a ring reader's skip is still
    /// reported.
    #[test]
    fn only_a_ring_reader_s_silent_skip_is_taken_for_dropped_claims() {
        let got = taken(&mut JoinsLate { given: false, window: 0 });
        assert!(got.len() == 1 && got[0].starts_with("Message"), "{got:?}");
        let got = taken(&mut JoinsLate { given: false, window: 1024 });
        assert!(got.len() == 2 && got[0].starts_with("Aborted"), "{got:?}");
    }
}
