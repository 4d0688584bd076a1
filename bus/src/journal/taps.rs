//! [`Tap`] for every stream subscriber, through the one stream API: a recorder records any
//! transport (and any URI opened at run time, as `AnySubscriber`) with the same code.
use super::recorder::{Taken, Tap};
use crate::ring::{Recv, RingMemory};
use crate::stream::{Retry, Subscribe};
use crate::Subscriber;

/// One take from any subscriber: positions it moved past without a message (dropped claims: a
/// lap is reported as a Gap instead) are handed over as `Aborted`, then what it delivered. A
/// retryable error (one foreign datagram dropped by a ud-mcast subscriber) is something taken:
/// the recorder polls on.
fn take<S: Subscribe>(s: &mut S, f: &mut dyn FnMut(Taken<'_>)) -> Result<bool, String> {
    s.set_manual_release(true);
    let before = s.position();
    match s.try_recv() {
        Ok(Some(r)) => {
            if let Recv::Message(m) = &r {
                if m.position > before {
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
        Err(e) => Err(e.to_string()),
    }
}

/// `Tap` for a subscriber type, by its `Subscribe` impl.
macro_rules! tap_by_subscribe {
    ($($(#[$m:meta])* [$($g:tt)*] $t:ty),* $(,)?) => {$(
        $(#[$m])*
        impl<$($g)*> Tap for $t {
            fn take(&mut self, f: &mut dyn FnMut(Taken<'_>)) -> Result<bool, String> {
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
