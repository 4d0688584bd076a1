//! Repairing the feed handler's book after messages were lost for good (a `FeedGap`: both lines
//! missed them and nobody resent them), so the market data it publishes is right again and a
//! trader that stopped at the gap can take a whole book and trade on.
//!
//! Why the feed's own book needs it: ITCH executions, cancels and replaces name only an order
//! reference; the normaliser takes the price, size and side from its book. An order added in a
//! gap is unknown to it for the rest of the day, and every later message about that order is
//! published without them. So the feed takes the venue's book ([`super::glimpse`]) and puts it
//! in its normaliser's place, and its snapshot maker publishes that book for traders.
//!
//! Who does what:
//! - The feed's loop ([`BookRepair`], owned by the [`FeedHandler`](super::FeedHandler)): from
//!   a loss on it keeps a copy of every ITCH message it delivers in a ring made at start (no
//!   allocation, no syscall). When the helper hands it the venue's book as of sequence `next`,
//!   it applies the ring's messages from `next` on to that book, a bounded number per poll,
//!   while the live messages go on being published (and kept); once the book has caught up, it
//!   swaps it in between two messages, at market-data position `Q`. The market data from `Q`
//!   on is right again; what it published between the loss and `Q` is not, and traders skip it.
//! - The helper ([`super::repair_helper`], a thread of its own): fetches the venue's book over
//!   TCP, hands one copy to the loop and keeps another; once told of the swap, it applies the
//!   same ring to its copy, takes the market data from `Q` on, and publishes whole-book
//!   snapshots stamped `Q` or later (a trader recovering from the `FeedGap` takes the first).
//!
//! A venue book older than the loss (it does not hold every message lost) is refused and
//! another fetched; a new loss while catching up starts over; a ring that fills before a book
//! comes starts over from where it filled. The loop never waits for the helper.
use tickbus_codecs::book::OrderBook;
use tickbus_codecs::normalize::Normalizer;

/// The longest ITCH message kept (NOII, the longest ITCH 5.0 type, is 50 bytes).
pub const RING_MESSAGE_BYTES: usize = 64;

#[derive(Clone, Copy)]
struct Kept {
    sequence: u64,
    len: u32,
    bytes: [u8; RING_MESSAGE_BYTES],
}

const EMPTY: Kept = Kept { sequence: 0, len: 0, bytes: [0; RING_MESSAGE_BYTES] };

/// The ITCH messages delivered since a loss, in order (made and touched once, at start).
pub struct ItchRing {
    kept: Box<[Kept]>,
    len: usize,
}

impl ItchRing {
    /// Room for `capacity` messages.
    pub fn with_capacity(capacity: usize) -> ItchRing {
        ItchRing { kept: vec![EMPTY; capacity.max(1)].into_boxed_slice(), len: 0 }
    }

    /// Keeps one message; false when full (or longer than [`RING_MESSAGE_BYTES`]).
    #[inline]
    fn push(&mut self, sequence: u64, itch: &[u8]) -> bool {
        if self.len == self.kept.len() || itch.len() > RING_MESSAGE_BYTES {
            return false;
        }
        let k = &mut self.kept[self.len];
        (k.sequence, k.len) = (sequence, itch.len() as u32);
        k.bytes[..itch.len()].copy_from_slice(itch);
        self.len += 1;
        true
    }

    fn clear(&mut self) {
        self.len = 0;
    }

    /// Messages kept.
    pub fn len(&self) -> usize {
        self.len
    }

    /// Whether none is kept.
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// The `i`th message kept: its session sequence and bytes.
    pub fn get(&self, i: usize) -> Option<(u64, &[u8])> {
        let k = self.kept[..self.len].get(i)?;
        Some((k.sequence, &k.bytes[..k.len as usize]))
    }

    /// Applies the kept messages from index `from` on whose sequence is at least `next` to
    /// `book`, looking at most at `max`; returns the index after the last looked at and how
    /// many were applied (the others were in the book already).
    pub fn apply(&self, book: &mut OrderBook, from: usize, next: u64, max: usize) -> (usize, usize) {
        let end = self.len.min(from.saturating_add(max));
        let mut applied = 0;
        for k in &self.kept[from.min(end)..end] {
            if k.sequence < next {
                continue;
            }
            applied += 1;
            if let Ok(m) = tickbus_codecs::itch::parse(&k.bytes[..k.len as usize], k.sequence) {
                // An order the venue's book does not hold is the venue's to answer for: the
                // book refuses it as the normaliser's would.
                let _ = book.apply(&m);
            }
        }
        (end, applied)
    }
}

/// From the feed's loop to the helper.
pub enum ToHelper {
    /// Messages before session sequence `need` were lost (or not kept): a venue book holding
    /// every message before `need`, or later, is wanted.
    Lost {
        /// The first sequence the book may go on from.
        need: u64,
        /// The MoldUDP64 session the feed follows (None: not known, as for an ITCH file): a
        /// venue book of another session is refused.
        session: Option<[u8; 10]>,
    },
    /// The venue's book (as of `next`), caught up with the ring, is the normaliser's from
    /// market-data position `position` on. `old` is the book it replaced and `ring` the
    /// messages it was caught up with: the helper applies them to its copy, then gives the
    /// ring back and drops the old book (never on the feed's loop: a big free).
    Swapped {
        /// The venue book's sequence.
        next: u64,
        /// The market-data position from which the feed's messages are right again.
        position: u64,
        /// The feed's book before.
        old: Box<OrderBook>,
        /// The messages the venue's book was caught up with.
        ring: Box<ItchRing>,
    },
    /// A venue book not taken: older than the loss (`need`: what is wanted now; 0: none) or
    /// come after the repair ended. Dropped by the helper.
    Refused {
        /// The book.
        book: Box<OrderBook>,
        /// The sequence a book must go on from now (0: no loss open).
        need: u64,
        /// The session the feed follows now (None: not known).
        session: Option<[u8; 10]>,
    },
}

/// From the helper to the feed's loop.
pub enum ToFeed {
    /// The venue's book, holding every message before `next`.
    Book {
        /// The book (its room made and touched by the helper).
        book: Box<OrderBook>,
        /// The sequence it goes on from.
        next: u64,
        /// The MoldUDP64 session it is of: a book fetched for a session the feed has since
        /// left is refused, whatever its sequence.
        session: [u8; 10],
    },
    /// The ring back, for the next loss.
    Ring(Box<ItchRing>),
    /// The helper's own copy lost messages (its queue from the loop overflowed): repair from
    /// the next message on, so its book becomes whole again.
    Repair,
}

/// What the loop's side of the repair did.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
#[cfg_attr(feature = "serde", derive(serde::Serialize, serde::Deserialize))]
pub struct RepairCounts {
    /// Losses that started (or restarted) a repair.
    pub losses: u64,
    /// Venue books swapped in: repairs done.
    pub repaired: u64,
    /// Venue books refused (older than the loss, or a newer loss came first).
    pub refused: u64,
    /// Times the ring filled before a venue book came (the repair started over from there).
    pub ring_full: u64,
    /// Messages the last repair caught the venue's book up with (kept since the loss and not
    /// in the venue's book yet).
    pub last_caught_up: u64,
    /// The market-data position of the last swap.
    pub last_position: u64,
}

enum State {
    Idle,
    /// Keeping messages from `need` on (while a ring is here), waiting for a venue book.
    Keeping {
        need: u64,
    },
    /// Applying the ring to the venue's book (`at`: the next ring index to apply; `applied`:
    /// how many were not in it yet).
    CatchingUp {
        book: Box<OrderBook>,
        next: u64,
        at: usize,
        applied: usize,
    },
}

/// Ring messages looked at per poll of the feed's loop while catching the venue's book up: at
/// least this many (about 5 µs of work), and four times what was kept since the last poll, so
/// the catch-up gains on a burst (three messages a poll for each one that came) instead of
/// chasing it.
pub const CATCH_UP_PER_POLL: usize = 64;

/// The queues between the loop and the helper. At most a few messages are ever in flight (one
/// venue book at a time, its answer, the ring, and the losses, which are merged while they
/// wait): a queue that fills is a helper that stopped taking anything.
const QUEUE: usize = 64;

/// The feed loop's side (see the module docs).
pub struct BookRepair {
    to_helper: rtrb::Producer<ToHelper>,
    from_helper: rtrb::Consumer<ToFeed>,
    /// Messages the queue had no room for, in order (sent first at the next poll).
    backlog: std::collections::VecDeque<ToHelper>,
    ring: Option<Box<ItchRing>>,
    state: State,
    /// The last sequence delivered.
    last: u64,
    /// Messages kept since the last poll.
    kept: usize,
    /// The session the feed follows (told by the handler as the arbiter starts each one, or
    /// with a loss): the venue's book must be of it.
    session: Option<[u8; 10]>,
    counts: RepairCounts,
}

/// The helper's ends of the channels (see [`super::repair_helper`]).
pub struct HelperEnds {
    /// Messages from the loop.
    pub from_feed: rtrb::Consumer<ToHelper>,
    /// Messages to the loop.
    pub to_feed: rtrb::Producer<ToFeed>,
}

/// A repair whose ring keeps up to `ring` messages between a loss and the venue's book caught
/// up (at 1M msg/s, 2^17 is 130 ms), and the helper's ends.
pub fn channel(ring: usize) -> (BookRepair, HelperEnds) {
    let (to_helper, from_feed) = rtrb::RingBuffer::new(QUEUE);
    let (to_feed, from_helper) = rtrb::RingBuffer::new(QUEUE);
    let r = BookRepair {
        to_helper,
        from_helper,
        backlog: std::collections::VecDeque::with_capacity(QUEUE),
        ring: Some(Box::new(ItchRing::with_capacity(ring))),
        state: State::Idle,
        last: 0,
        kept: 0,
        session: None,
        counts: RepairCounts::default(),
    };
    (r, HelperEnds { from_feed, to_feed })
}

impl BookRepair {
    /// What it did.
    pub fn counts(&self) -> RepairCounts {
        self.counts
    }

    /// Whether a repair is under way (the market data is not right until it ends).
    pub fn repairing(&self) -> bool {
        !matches!(self.state, State::Idle)
    }

    /// The message of session sequence `sequence` was delivered (every one, ITCH this build
    /// parses or not): kept while repairing.
    #[inline]
    pub fn on_message(&mut self, sequence: u64, itch: &[u8]) {
        self.last = sequence;
        match self.state {
            State::Idle => return,
            // In the venue's book already: not kept (a book far ahead would fill the ring with
            // messages nobody applies).
            State::CatchingUp { next, .. } if sequence < next => return,
            _ => {}
        }
        let kept = self.ring.as_mut().map(|r| r.push(sequence, itch));
        match (kept, &mut self.ring) {
            (Some(true), _) => self.kept += 1,
            (Some(false), Some(r)) => {
                // Full: what the ring dropped must be in the venue's book: start over after it.
                r.clear();
                self.counts.ring_full += 1;
                self.restart(sequence + 1);
            }
            // The ring is still with the helper: nothing is kept, so the venue's book must
            // hold this message too (the helper is told when the ring comes back).
            _ => match &mut self.state {
                State::Keeping { need } => *need = sequence + 1,
                _ => self.restart(sequence + 1),
            },
        }
    }

    /// Messages before `to` of `session` (None: not known) were lost for good (published as a
    /// `FeedGap`). A session named here is followed as [`BookRepair::on_session`] follows one.
    pub fn on_lost(&mut self, to: u64, session: Option<[u8; 10]>) {
        if let Some(s) = session {
            self.on_session(s);
        }
        self.counts.losses += 1;
        // Given up: never delivered, so a venue's book holding them waits for nothing more
        // (a loss at the session's end would otherwise leave the repair waiting for ever).
        self.last = self.last.max(to.saturating_sub(1));
        if let Some(r) = &mut self.ring {
            r.clear();
        }
        self.restart(to);
    }

    /// The feed follows MoldUDP64 session `session` from here on (the arbiter started it; its
    /// sequences start again at 1). A venue book must be of it; a repair under way for the
    /// session before starts over from the new session's first message, since the book the
    /// loss left wrong goes on into it (the market data goes on across sessions).
    pub fn on_session(&mut self, session: [u8; 10]) {
        let was = self.session.replace(session);
        if was.is_none_or(|w| w == session) {
            return;
        }
        self.last = 0;
        if self.repairing() {
            if let Some(r) = &mut self.ring {
                r.clear();
            }
            self.restart(1);
        }
    }

    /// Keeps from `need` on; a book being caught up goes back, and the helper is told.
    fn restart(&mut self, need: u64) {
        if let State::CatchingUp { book, .. } = std::mem::replace(&mut self.state, State::Keeping { need }) {
            self.counts.refused += 1;
            self.send(ToHelper::Refused { book, need, session: self.session });
        } else {
            self.send(ToHelper::Lost { need, session: self.session });
        }
    }

    /// Sends in order: behind what waits in the backlog, if anything does. A loss waiting last
    /// there takes a newer one's sequence instead of a second entry (the helper wants only the
    /// latest), so the backlog holds a few entries at most; nothing is ever dropped (a book or
    /// the ring dropped here would be freed on the loop, and the ring lost for the day).
    fn send(&mut self, m: ToHelper) {
        if let ToHelper::Lost { need, session } = m {
            // Only into the newest entry: a loss must not move ahead of a swap sent before it.
            // Sequences of one session only are compared: a newer session's need replaces.
            if let Some(ToHelper::Lost { need: waiting, session: was }) = self.backlog.back_mut() {
                *waiting = if *was == session { (*waiting).max(need) } else { need };
                *was = session;
                return;
            }
        }
        if !self.backlog.is_empty() {
            self.backlog.push_back(m); // within its capacity (no allocation) unless the helper stopped
            return;
        }
        if let Err(rtrb::PushError::Full(m)) = self.to_helper.push(m) {
            self.backlog.push_back(m);
        }
    }

    /// Once a poll of the feed's loop: takes what the helper sent, applies a bounded number of
    /// kept messages to the venue's book ([`CATCH_UP_PER_POLL`]), and swaps it in once caught
    /// up, at market-data position `position` (the next to be published).
    #[inline]
    pub fn poll(&mut self, norm: &mut Normalizer, position: u64) {
        while let Some(m) = self.backlog.pop_front() {
            if let Err(rtrb::PushError::Full(m)) = self.to_helper.push(m) {
                self.backlog.push_front(m);
                break;
            }
        }
        while let Ok(m) = self.from_helper.pop() {
            self.take(m);
        }
        let budget = CATCH_UP_PER_POLL.max(4 * std::mem::take(&mut self.kept));
        let last = self.last;
        let State::CatchingUp { book, next, at, applied } = &mut self.state else { return };
        let Some(ring) = &self.ring else { return };
        let (end, n) = ring.apply(book, *at, *next, budget);
        (*at, *applied) = (end, *applied + n);
        // Swapped in only once every message kept is in it, and every message it holds has
        // been delivered here: a venue's book ahead of the lines (its service answers before
        // the multicast arrives, or a later gap holds messages back) waits for them, which are
        // then skipped instead of applied twice.
        if *at < ring.len() || last.saturating_add(1) < *next {
            return;
        }
        let (next, applied) = (*next, *applied);
        let State::CatchingUp { mut book, .. } = std::mem::replace(&mut self.state, State::Idle) else {
            unreachable!("matched above")
        };
        // The venue's book goes in; the old one leaves in its box (freed by the helper).
        std::mem::swap(norm.book_mut(), &mut *book);
        let ring = self.ring.take().expect("held while catching up");
        self.counts.repaired += 1;
        self.counts.last_caught_up = applied as u64;
        self.counts.last_position = position;
        self.send(ToHelper::Swapped { next, position, old: book, ring });
    }

    fn take(&mut self, m: ToFeed) {
        match m {
            ToFeed::Ring(mut r) => {
                r.clear();
                self.ring = Some(r);
                // Kept nothing meanwhile: the venue's book must hold everything so far.
                if let State::Keeping { .. } = self.state {
                    self.restart(self.last + 1);
                }
            }
            ToFeed::Repair => {
                if matches!(self.state, State::Idle) {
                    self.counts.losses += 1;
                    if let Some(r) = &mut self.ring {
                        r.clear();
                    }
                    self.restart(self.last + 1);
                }
            }
            ToFeed::Book { book, next, session } => match self.state {
                State::Keeping { need }
                    if next >= need && self.ring.is_some() && self.session.is_none_or(|s| s == session) =>
                {
                    self.state = State::CatchingUp { book, next, at: 0, applied: 0 };
                }
                State::Keeping { need } => {
                    self.counts.refused += 1;
                    self.send(ToHelper::Refused { book, need, session: self.session });
                }
                _ => {
                    self.counts.refused += 1;
                    self.send(ToHelper::Refused { book, need: 0, session: self.session });
                }
            },
        }
    }
}
