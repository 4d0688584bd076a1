//! Wire-to-trade: a MoldUDP64 datagram sent on a veth, taken by `tickbus feed` (AF_XDP or
//! UDP), published as market data on a ring, read by `tickbus trader`, its order read by
//! `tickbus gateway`: one run per ingest and rate, hop by hop.
use serde::{Deserialize, Serialize};

use super::pipeline::Hop;

/// One wire-to-trade run.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct WireTrade {
    /// `xdp` or `udp`: how the feed took the datagrams.
    pub ingest: String,
    pub rate: u64,
    /// Which process ran on which core, and whether cores were shared.
    pub layout: String,
    /// The hops in pipeline order, each its own percentiles: wire send -> feed ingress, feed
    /// ingress -> market data published (the feed, every datagram), market data publish begins
    /// -> strategy receive (the trader's, from each message's publish lag; by difference, see
    /// [`ring_hop`], from a feed that gives none), then the trader's and the gateway's (per
    /// order).
    pub hops: Vec<Hop>,
    /// Wire send -> gateway receive, per order: wire-to-trade.
    pub total: Hop,
    /// Wire send -> strategy receive: over every tick (the trader) and over the ticks that led
    /// to an order (the gateway).
    pub every_tick: Hop,
    pub ordered_tick: Hop,
    pub sent: u64,
    /// Market-data messages the feed published, and gaps it published (each a `FeedGap`
    /// message the trader counts as a tick too).
    pub published: u64,
    #[serde(default)]
    pub gaps_published: u64,
    /// Why the trader halted, if it did (a gap: it stops trading; orders end there).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub halted: Option<String>,
    pub ticks: u64,
    pub orders: u64,
    pub reports: u64,
    /// Messages the feed lost (published as gaps) and ticks the trader missed.
    pub lost: u64,
    pub missed: u64,
    /// The sender fell behind its schedule, or the feed or the trader did (what they lost): the
    /// percentiles then measure queueing.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub backlog: Option<String>,
}

/// The market-data ring hop from a feed that gives no publish lag (none before this release),
/// which then no process stamps at both ends (the message carries one stamp, the wire send):
/// every tick's wire send -> strategy receive less the feed's two hops,
/// percentile by percentile, at least 0. Percentiles do not subtract exactly; the name says so.
/// Its max is 0, shown as "-": maxima of different messages subtract to nothing.
#[cfg_attr(not(feature = "xdp"), allow(dead_code))]
pub fn ring_hop(every_tick: &Hop, wire: &Hop, feed: &Hop) -> Hop {
    let less = |t: u64, a: u64, b: u64| t.saturating_sub(a + b);
    Hop {
        name: "market data published -> strategy receive (by difference)".into(),
        count: every_tick.count,
        p50: less(every_tick.p50, wire.p50, feed.p50),
        p99: less(every_tick.p99, wire.p99, feed.p99),
        p99_9: less(every_tick.p99_9, wire.p99_9, feed.p99_9),
        max: 0,
        floor: None,
        x_floor: None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn hop(p50: u64, p99: u64) -> Hop {
        Hop { name: String::new(), count: 1, p50, p99, p99_9: p99, max: p99, floor: None, x_floor: None }
    }

    #[test]
    fn the_ring_hop_is_what_the_feed_does_not_explain_and_never_negative() {
        let r = ring_hop(&hop(1000, 5000), &hop(300, 4000), &hop(200, 2000));
        assert_eq!((r.p50, r.p99), (500, 0));
        assert!(r.name.contains("by difference"));
    }
}
