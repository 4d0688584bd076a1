//! `mold-server --glimpse ADDR`: the venue's whole book over TCP (`tickbus::feed::glimpse`).
//! The server keeps a book of every message it has sent; a client that connects gets it as it
//! stands at that moment, written by a thread of its own (a client that reads slowly holds
//! neither the lines nor the re-request server), and the connection closes.
use std::net::{SocketAddr, TcpListener};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::Duration;

use tickbus_codecs::book::OrderBook;

use super::policy::Policy;

/// Clients served at once; one more is closed unanswered (and asks again).
const MAX_CLIENTS: usize = 4;
/// Connections taken per pass of the send loop (a flood of connections cannot hold the lines).
const ACCEPTS_PER_SERVE: usize = 4;
/// How long one client may take to read its whole book.
const WRITE_TIMEOUT: Duration = Duration::from_secs(10);

pub struct BookService {
    listener: TcpListener,
    /// The MoldUDP64 session whose messages the book holds (each glimpse says it).
    session: [u8; 10],
    book: OrderBook,
    /// The sequence of the first message not in the book.
    next: u64,
    busy: Arc<AtomicUsize>,
    /// The last book encoded, and the sequence it goes on from: clients asking before the next
    /// message is sent share it (a big book is encoded once, not once a client).
    encoded: Option<(u64, Arc<Vec<u8>>)>,
    served: u64,
    refused: u64,
    busy_refused: u64,
    not_itch: u64,
}

impl BookService {
    pub fn bind(addr: SocketAddr, session: [u8; 10]) -> Result<BookService, String> {
        let listener =
            TcpListener::bind(addr).map_err(|e| format!("--glimpse {addr}: binding the book service: {e}"))?;
        listener.set_nonblocking(true).map_err(|e| e.to_string())?;
        eprintln!("mold-server: the venue's book served on tcp {addr}");
        Ok(BookService {
            listener,
            session,
            // Room for a TotalView day (a million orders, every stock locate).
            book: OrderBook::with_capacity(1 << 20, 8192),
            next: 1,
            busy: Arc::default(),
            encoded: None,
            served: 0,
            refused: 0,
            busy_refused: 0,
            not_itch: 0,
        })
    }

    /// The message of sequence `sequence` was sent (put in a packet).
    pub fn sent(&mut self, itch: &[u8], sequence: u64) {
        match tickbus_codecs::itch::parse(itch, sequence) {
            Ok(m) => {
                let _ = self.book.apply(&m);
            }
            Err(_) => self.not_itch += 1,
        }
        self.next = sequence + 1;
    }

    /// Answers the clients waiting (never blocks).
    pub fn serve(&mut self, policy: &Policy) {
        for _ in 0..ACCEPTS_PER_SERVE {
            let Ok((client, from)) = self.listener.accept() else { break };
            if !policy.allows(from.ip()) {
                if self.refused == 0 {
                    eprintln!(
                        "mold-server: refused the book to {}: not in --allow (further refusals are only counted)",
                        from.ip()
                    );
                }
                self.refused += 1;
                continue;
            }
            if self.busy.load(Ordering::Acquire) >= MAX_CLIENTS {
                self.busy_refused += 1;
                continue;
            }
            let bytes = match &self.encoded {
                Some((next, b)) if *next == self.next => b.clone(),
                _ => {
                    let mut b = Vec::new();
                    tickbus::feed::glimpse::encode(&self.book, &self.session, self.next, &mut b);
                    let b = Arc::new(b);
                    self.encoded = Some((self.next, b.clone()));
                    b
                }
            };
            self.busy.fetch_add(1, Ordering::AcqRel);
            let busy = self.busy.clone();
            let spawned = std::thread::Builder::new().name("glimpse".into()).spawn(move || {
                let _ = tickbus::feed::glimpse::serve(client, &bytes, WRITE_TIMEOUT);
                busy.fetch_sub(1, Ordering::AcqRel);
            });
            match spawned {
                Ok(_) => self.served += 1,
                Err(_) => {
                    self.busy.fetch_sub(1, Ordering::AcqRel);
                    self.busy_refused += 1;
                }
            }
        }
    }

    pub fn summary(&self) -> serde_json::Value {
        serde_json::json!({"served": self.served, "refused": self.refused, "busy": self.busy_refused,
            "not_itch": self.not_itch, "orders": self.book.resting_orders(), "next": self.next})
    }
}
