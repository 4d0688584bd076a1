//! The device's asynchronous events: its port going down or coming back, a QP gone fatal, the
//! device lost. A background thread reads them off the hot path, so a publisher learns of a
//! local port going down at once, not when its QP retry budget runs out (19-22 s on the rig for a
//! cut link, against 0.7 s for a powered-off peer, which NAKs or stops ACKing at once).
//!
//! The thread waits in `poll(2)` on the context's async fd (100 ms at a time, to see its stop
//! flag), takes each event with `ibv_get_async_event`, acknowledges it, and records it in
//! [`AsyncEvents`]: the hot path reads one word ([`AsyncEvents::generation`]) and looks further
//! only when it moved.
use std::os::fd::RawFd;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;

use rdma_sys as ffi;

/// Most fatal QPs remembered between two looks (a publisher looks at every publish).
const MAX_FATAL_QPS: usize = 1024;

/// What the device has said since it was opened.
#[derive(Debug, Default)]
pub struct AsyncEvents {
    generation: AtomicU64,
    /// Bit `n` set: port `n` went down and has not come back (ports are numbered 1..=255 by
    /// verbs; a device with more than 63 ports is unheard of, so higher ones share bit 0).
    ports_down: AtomicU64,
    device_fatal: AtomicBool,
    fatal_qps: Mutex<Vec<u32>>,
}

impl AsyncEvents {
    /// Moves on every event recorded: compare it with the value last seen (one relaxed load, no
    /// syscall) and look at the rest only when it moved.
    #[inline]
    pub fn generation(&self) -> u64 {
        self.generation.load(Ordering::Acquire)
    }

    /// Port `port` went down (`IBV_EVENT_PORT_ERR`) and has not come back active since. Per
    /// port: another port of the same device going down (or up) says nothing about this one.
    pub fn port_down(&self, port: u8) -> bool {
        self.ports_down.load(Ordering::Acquire) & port_bit(port) != 0
    }

    /// The device failed (`IBV_EVENT_DEVICE_FATAL`): nothing on it works any more.
    pub fn device_fatal(&self) -> bool {
        self.device_fatal.load(Ordering::Acquire)
    }

    /// Takes the numbers of the QPs that went fatal (or saw a request or access error) since the
    /// last call.
    pub fn take_fatal_qps(&self) -> Vec<u32> {
        self.fatal_qps.lock().map(|mut v| std::mem::take(&mut *v)).unwrap_or_default()
    }

    /// Records one event: `element` is the QP number for QP events and the port number for port
    /// events (the union `ibv_async_event.element` holds one or the other).
    fn record(&self, kind: u32, element: Option<u32>) {
        use ffi::ibv_event_type as E;
        let port = || port_bit(element.and_then(|p| u8::try_from(p).ok()).unwrap_or(0));
        match kind {
            k if k == E::IBV_EVENT_PORT_ERR as u32 => {
                self.ports_down.fetch_or(port(), Ordering::AcqRel);
            }
            k if k == E::IBV_EVENT_PORT_ACTIVE as u32 => {
                self.ports_down.fetch_and(!port(), Ordering::AcqRel);
            }
            k if k == E::IBV_EVENT_DEVICE_FATAL as u32 => self.device_fatal.store(true, Ordering::Release),
            _ => match element {
                Some(n) => {
                    if let Ok(mut v) = self.fatal_qps.lock() {
                        if v.len() < MAX_FATAL_QPS {
                            v.push(n);
                        }
                    }
                }
                None => return, // informational (path migration, LID or GID change, ...)
            },
        }
        self.generation.fetch_add(1, Ordering::AcqRel);
    }
}

/// The bit of `port` in [`AsyncEvents::ports_down`].
fn port_bit(port: u8) -> u64 {
    1u64 << if port < 64 { port } else { 0 }
}

/// The raw context, moved to the watcher thread: the context outlives the thread
/// ([`Watcher::stop`] joins it before the context is closed).
struct Ctx(*mut ffi::ibv_context);
// SAFETY: libibverbs contexts are thread-safe; the watcher only reads events from it.
unsafe impl Send for Ctx {}

/// The thread reading one context's events.
pub(crate) struct Watcher {
    pub(crate) events: Arc<AsyncEvents>,
    stop: Arc<AtomicBool>,
    thread: Option<JoinHandle<()>>,
}

impl Watcher {
    /// Starts watching `ctx`'s async events.
    ///
    /// # Safety
    /// `ctx` is an open context that stays open until [`Watcher::stop`] has returned.
    pub(crate) unsafe fn start(ctx: *mut ffi::ibv_context, device: &str) -> std::io::Result<Watcher> {
        // SAFETY: ctx is open (the caller's promise); async_fd is a plain field.
        let fd: RawFd = unsafe { (*ctx).async_fd };
        // Non-blocking, so a read after poll(2) said ready (or a spurious wake) never blocks.
        // SAFETY: fcntl on an fd the context owns, changing only its status flags.
        let flags = unsafe { libc::fcntl(fd, libc::F_GETFL) };
        // SAFETY: as above.
        if flags < 0 || unsafe { libc::fcntl(fd, libc::F_SETFL, flags | libc::O_NONBLOCK) } < 0 {
            return Err(std::io::Error::last_os_error());
        }
        let (events, stop) = (Arc::new(AsyncEvents::default()), Arc::new(AtomicBool::new(false)));
        let (ev, st, c) = (events.clone(), stop.clone(), Ctx(ctx));
        let thread = std::thread::Builder::new()
            .name(format!("tickbus-{device}-events"))
            .spawn(move || watch(c, fd, &ev, &st))?;
        Ok(Watcher { events, stop, thread: Some(thread) })
    }

    /// Stops the thread and waits for it (within 100 ms: its poll timeout).
    pub(crate) fn stop(&mut self) {
        self.stop.store(true, Ordering::Release);
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}

impl Drop for Watcher {
    fn drop(&mut self) {
        self.stop();
    }
}

fn watch(ctx: Ctx, fd: RawFd, events: &AsyncEvents, stop: &AtomicBool) {
    let c = ctx;
    while !stop.load(Ordering::Acquire) {
        let mut p = libc::pollfd { fd, events: libc::POLLIN, revents: 0 };
        // SAFETY: one valid pollfd for the call's duration.
        let n = unsafe { libc::poll(&mut p, 1, 100) };
        if n <= 0 {
            continue; // timeout, or EINTR: look at the stop flag and wait again
        }
        if p.revents & (libc::POLLERR | libc::POLLHUP | libc::POLLNVAL) != 0 {
            // The device is gone (hot-unplug, or reset after a fatal error): poll would return at
            // once for ever. Say so and stop watching.
            events.record(ffi::ibv_event_type::IBV_EVENT_DEVICE_FATAL as u32, None);
            return;
        }
        loop {
            let mut ev = std::mem::MaybeUninit::<ffi::ibv_async_event>::zeroed();
            // SAFETY: the context is open until the watcher is stopped; `ev` is writable memory of
            // the event's size. Non-blocking fd: returns -1 once no event is waiting.
            if unsafe { ffi::ibv_get_async_event(c.0, ev.as_mut_ptr()) } != 0 {
                break;
            }
            // The event type as a number: a bindgen enum must never hold a value it does not name.
            // SAFETY: ibv_get_async_event filled the struct; event_type is a 32-bit field.
            let kind = unsafe { std::ptr::addr_of!((*ev.as_ptr()).event_type).cast::<u32>().read() };
            let qp_event = [
                ffi::ibv_event_type::IBV_EVENT_QP_FATAL,
                ffi::ibv_event_type::IBV_EVENT_QP_REQ_ERR,
                ffi::ibv_event_type::IBV_EVENT_QP_ACCESS_ERR,
            ]
            .iter()
            .any(|&e| e as u32 == kind);
            let port_event = [ffi::ibv_event_type::IBV_EVENT_PORT_ERR, ffi::ibv_event_type::IBV_EVENT_PORT_ACTIVE]
                .iter()
                .any(|&e| e as u32 == kind);
            let element = if port_event {
                // SAFETY: for port events the element union holds the port number (an int at
                // offset 0).
                Some(unsafe { std::ptr::addr_of!((*ev.as_ptr()).element).cast::<i32>().read() } as u32)
            } else {
                qp_event.then(|| {
                    // SAFETY: for these event types the element (a union whose members all start at
                    // its offset 0) is the QP, alive until the event is acknowledged (ibv_destroy_qp
                    // waits for that).
                    unsafe {
                        let qp = std::ptr::addr_of!((*ev.as_ptr()).element).cast::<*mut ffi::ibv_qp>().read();
                        qp.as_ref().map_or(0, |q| q.qp_num)
                    }
                })
            };
            events.record(kind, element);
            // SAFETY: acknowledges the event just taken, once.
            unsafe { ffi::ibv_ack_async_event(ev.as_mut_ptr()) };
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn port_and_qp_events_move_the_generation_and_informational_ones_do_not() {
        use ffi::ibv_event_type as E;
        let a = AsyncEvents::default();
        a.record(E::IBV_EVENT_GID_CHANGE as u32, None);
        assert_eq!(a.generation(), 0);
        a.record(E::IBV_EVENT_PORT_ERR as u32, Some(1));
        assert!(a.port_down(1) && a.generation() == 1);
        a.record(E::IBV_EVENT_QP_FATAL as u32, Some(17));
        assert_eq!((a.take_fatal_qps(), a.take_fatal_qps()), (vec![17], vec![]));
        a.record(E::IBV_EVENT_PORT_ACTIVE as u32, Some(1));
        assert!(!a.port_down(1) && a.generation() == 3);
        a.record(E::IBV_EVENT_DEVICE_FATAL as u32, None);
        assert!(a.device_fatal());
    }

    #[test]
    fn a_port_event_concerns_its_own_port_only() {
        use ffi::ibv_event_type as E;
        let a = AsyncEvents::default();
        // Port 2 going down says nothing about port 1 (a dual-port NIC, publisher on port 1).
        a.record(E::IBV_EVENT_PORT_ERR as u32, Some(2));
        assert!(a.port_down(2) && !a.port_down(1));
        // Port 1 down, then port 2 back: port 1 is still down.
        a.record(E::IBV_EVENT_PORT_ERR as u32, Some(1));
        a.record(E::IBV_EVENT_PORT_ACTIVE as u32, Some(2));
        assert!(a.port_down(1) && !a.port_down(2));
    }
}
