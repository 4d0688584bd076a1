//! Taking control connections off the listening thread: each handshake runs on a thread of its
//! own, so a peer that is slow or silent holds up nobody else.
use std::net::{TcpListener, TcpStream};
use std::sync::{mpsc, Arc};

use super::error::ControlError;

/// The most handshakes in progress at once; a connection past that is told so and closed.
pub(crate) const MAX_HANDSHAKES: usize = 8;

/// Accepts connections on a non-blocking listener and runs each one's handshake on a thread of
/// its own, at most [`MAX_HANDSHAKES`] at once (more are told "busy" and closed), so a peer that
/// is slow or silent holds up nobody else. Shared by the rdma-rc acceptor and ud-mcast recovery.
pub(crate) struct Handshakes<T> {
    listener: TcpListener,
    running: usize,
    next_id: u64,
    done_tx: mpsc::Sender<(u64, T)>,
    done_rx: mpsc::Receiver<(u64, T)>,
}

impl<T: Send + 'static> Handshakes<T> {
    pub fn new(listener: TcpListener) -> Result<Handshakes<T>, ControlError> {
        listener.set_nonblocking(true).map_err(|e| ControlError::io("accept", e))?;
        let (done_tx, done_rx) = mpsc::channel();
        Ok(Handshakes { listener, running: 0, next_id: 1, done_tx, done_rx })
    }

    /// Starts a handshake for a waiting connection, if any, and returns one that finished, if
    /// any. Never blocks. `run` gets the connection and its id.
    pub fn poll(&mut self, run: &Arc<dyn Fn(TcpStream, u64) -> T + Send + Sync>) -> (bool, Option<(u64, T)>) {
        let mut busy = false;
        if let Ok((tcp, _)) = self.listener.accept() {
            busy = true;
            if self.running >= MAX_HANDSHAKES {
                refuse_busy(tcp);
            } else {
                let (id, run, done) = (self.next_id, run.clone(), self.done_tx.clone());
                self.next_id += 1;
                let spawned = std::thread::Builder::new().name("tickbus-hello".into()).spawn(move || {
                    let _ = done.send((id, run(tcp, id)));
                });
                self.running += usize::from(spawned.is_ok());
            }
        }
        match self.done_rx.try_recv() {
            Ok(r) => {
                self.running -= 1;
                (true, Some(r))
            }
            Err(_) => (busy, None),
        }
    }
}

fn refuse_busy(tcp: TcpStream) {
    use std::io::Write;
    let _ = tcp.set_nonblocking(true);
    let _ =
        (&tcp).write_all(format!("ERR {MAX_HANDSHAKES} handshakes already in progress; retry shortly\n").as_bytes());
}
