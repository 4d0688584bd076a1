//! The C ABI over RDMA, in the Soft-RoCE guest (tools/test.sh runs it there; on a host without
//! RDMA devices it reports ignored, and with TICKBUS_REQUIRE_RDMA set it fails): a publisher
//! and a subscriber opened by `rdma-rc://` and `ud-mcast://` URIs through `tb_publisher_open` /
//! `tb_subscriber_open`, on the guest's two devices, every message delivered in order through
//! `tb_subscriber_poll_into`, and a wrong device refused with the documented error. The calls are
//! the exported `extern "C"` functions themselves, made from Rust (the guest has no C compiler).
use std::ffi::{CStr, CString};
use std::time::{Duration, Instant};

use libtest_mimic::{Arguments, Failed, Trial};
use tickbus_ffi::*;

const N: u64 = 5_000;

fn main() {
    let mut args = Arguments::from_args();
    args.test_threads = Some(1);
    let skip = bus_devices().is_empty() && std::env::var_os("TICKBUS_REQUIRE_RDMA").is_none();
    if skip {
        eprintln!(
            "c_abi_rdma: no RDMA device on this host: tests ignored. They run in the Soft-RoCE guest (tools/test.sh)."
        );
    }
    let tests = vec![
        Trial::test("rdma_rc_through_the_c_abi_delivers_every_message_in_order", || {
            pubsub("rdma-rc://127.0.0.1:47411/7?reliable", true)
        }),
        Trial::test("ud_mcast_through_the_c_abi_delivers_every_message_in_order", || {
            pubsub("ud-mcast://239.77.61.1/8?recovery=127.0.0.1:47412", false)
        }),
        Trial::test("a_wrong_device_is_the_documented_open_error", wrong_device),
    ];
    libtest_mimic::run(&args, tests.into_iter().map(|t| t.with_ignored_flag(skip)).collect()).exit();
}

fn bus_devices() -> Vec<String> {
    bus::rdma::device_names()
}

fn last_error() -> String {
    // SAFETY: a NUL-terminated thread-local buffer; copied at once.
    unsafe { CStr::from_ptr(tb_last_error()) }.to_string_lossy().into_owned()
}

fn check(s: tb_status, what: &str) -> Result<(), Failed> {
    if s == tb_status::TB_OK {
        Ok(())
    } else {
        Err(format!("{what}: {s:?}: {}", last_error()).into())
    }
}

/// Options naming `device` and the shared secret.
fn options(device: &CString, token: &[u8]) -> Result<tb_open_options, Failed> {
    let mut o = std::mem::MaybeUninit::<tb_open_options>::uninit();
    // SAFETY: a writable tb_open_options; tb_open_options_init fills every field.
    check(unsafe { tb_open_options_init(o.as_mut_ptr()) }, "tb_open_options_init")?;
    // SAFETY: initialised just above.
    let mut o = unsafe { o.assume_init() };
    o.device = device.as_ptr();
    o.token = token.as_ptr();
    o.token_len = token.len();
    o.wait_ms = 60_000;
    Ok(o)
}

/// The devices: the publisher on the first, the subscriber on the second (the rig's rxe0 and
/// rxe1), or as TICKBUS_RDMA_DEVICE / TICKBUS_RDMA_PEER_DEVICE say.
fn devices() -> Result<(CString, CString), Failed> {
    let d = bus_devices();
    let pick = |i: usize, var: &str| std::env::var(var).ok().or_else(|| d.get(i).or(d.first()).cloned());
    let a = pick(0, "TICKBUS_RDMA_DEVICE").ok_or("no RDMA device")?;
    let b = pick(1, "TICKBUS_RDMA_PEER_DEVICE").ok_or("no RDMA device")?;
    Ok((CString::new(a)?, CString::new(b)?))
}

struct Pub(*mut tb_publisher);
// SAFETY: a C ABI handle may move between threads; one thread uses it at a time.
unsafe impl Send for Pub {}
impl Drop for Pub {
    fn drop(&mut self) {
        // SAFETY: a handle from tb_publisher_open, destroyed once.
        unsafe { tb_publisher_destroy(self.0) }
    }
}

struct Sub(*mut tb_subscriber);
// SAFETY: as for Pub.
unsafe impl Send for Sub {}
impl Drop for Sub {
    fn drop(&mut self) {
        // SAFETY: a handle from tb_subscriber_open, destroyed once.
        unsafe { tb_subscriber_destroy(self.0) }
    }
}

fn quote(k: u64) -> bus::codecs::md::Quote {
    use bus::codecs::Message;
    let mut q = bus::codecs::md::Quote::new();
    q.instrument_id = k as u32;
    q.bid_px = k as i64 * 3 - 1;
    q.ask_qty = k ^ 0x5a5a;
    q
}

fn pubsub(uri: &str, reliable: bool) -> Result<(), Failed> {
    use zerocopy::IntoBytes;
    let (dev_a, dev_b) = devices()?;
    let token = b"c-abi-rdma-test";
    let c_uri = CString::new(uri)?;
    let mut p = std::ptr::null_mut();
    let o = options(&dev_a, token)?;
    // SAFETY: a NUL-terminated URI, valid options, a writable out-pointer.
    check(unsafe { tb_publisher_open(c_uri.as_ptr(), &o, &mut p) }, "tb_publisher_open")?;
    let p = Pub(p);
    // The subscriber connects from its own thread (the rdma-rc publisher takes it in while idle).
    let sub_uri = c_uri.clone();
    let sub = std::thread::spawn(move || -> Result<Vec<u64>, String> {
        let o = options(&dev_b, token).map_err(|e| format!("{e:?}"))?;
        let mut s = std::ptr::null_mut();
        // SAFETY: as for the publisher.
        let st = unsafe { tb_subscriber_open(sub_uri.as_ptr(), &o, &mut s) };
        if st != tb_status::TB_OK {
            return Err(format!("tb_subscriber_open: {st:?}: {}", last_error()));
        }
        let s = Sub(s);
        let mut got = Vec::new();
        let mut q = quote(0);
        // SAFETY: tb_recv is plain data; every field is written by the poll before it is read.
        let mut r: tb_recv = unsafe { std::mem::zeroed() };
        let deadline = Instant::now() + Duration::from_secs(120);
        while (got.len() as u64) < N && Instant::now() < deadline {
            let buf = q.as_mut_bytes();
            // SAFETY: a live handle, a buffer of buf.len() bytes, a writable record.
            let st = unsafe { tb_subscriber_poll_into(s.0, buf.as_mut_ptr().cast(), buf.len(), &mut r) };
            if st != tb_status::TB_OK {
                return Err(format!("poll: {st:?}: {}", last_error()));
            }
            match r.kind {
                tb_recv_kind::TB_RECV_MESSAGE => {
                    let want = quote(got.len() as u64);
                    if (q.instrument_id, q.bid_px, q.ask_qty) != (want.instrument_id, want.bid_px, want.ask_qty) {
                        return Err(format!("message {} differs: {q:?}", got.len()));
                    }
                    got.push(r.position);
                }
                tb_recv_kind::TB_RECV_GAP => return Err(format!("gap {}..{}", r.position, r.resumed_at)),
                tb_recv_kind::TB_RECV_NONE => {}
            }
        }
        Ok(got)
    });
    // Wait for the reader (rdma-rc: connected; ud-mcast cannot tell, and joins on open).
    let deadline = Instant::now() + Duration::from_secs(60);
    if reliable {
        loop {
            let mut attached = false;
            // SAFETY: a live handle and a writable bool.
            check(unsafe { tb_publisher_has_reader(p.0, &mut attached) }, "tb_publisher_has_reader")?;
            if attached {
                break;
            }
            if Instant::now() > deadline {
                return Err("no subscriber connected in 60 s".into());
            }
            // SAFETY: a live handle.
            check(unsafe { tb_publisher_idle(p.0) }, "tb_publisher_idle")?;
            std::thread::sleep(Duration::from_millis(5));
        }
    } else {
        // Multicast: the subscriber joins within its open; give it that long, then recovery
        // (the publisher's history) covers what it missed at the start.
        std::thread::sleep(Duration::from_secs(2));
    }
    for k in 0..N {
        let mut q = quote(k);
        let bytes = q.as_mut_bytes();
        let mut pos = 0;
        loop {
            // SAFETY: a live handle, a message of bytes.len() bytes, a writable position.
            let st = unsafe { tb_publisher_send(p.0, bytes.as_mut_ptr().cast(), bytes.len(), &mut pos) };
            match st {
                tb_status::TB_OK => break,
                s if tb_status_retry_helps(s as i32) && Instant::now() < deadline + Duration::from_secs(60) => {
                    // SAFETY: a live handle.
                    unsafe { tb_publisher_idle(p.0) };
                }
                s => return Err(format!("send {k}: {s:?}: {}", last_error()).into()),
            }
        }
        if pos != k {
            return Err(format!("message {k} got position {pos}").into());
        }
        if !reliable && k % 64 == 63 {
            // Paced: a UD receive queue holds what the subscriber has not polled yet.
            std::thread::sleep(Duration::from_micros(200));
        }
    }
    // Keep the publisher serving (credit, recovery) until the subscriber has everything.
    let got = loop {
        if sub.is_finished() {
            break sub.join().map_err(|_| "subscriber panicked")??;
        }
        // SAFETY: a live handle.
        unsafe { tb_publisher_idle(p.0) };
        std::thread::sleep(Duration::from_millis(1));
    };
    assert_eq!(got.len() as u64, N, "every message");
    assert!(got.iter().enumerate().all(|(k, p)| *p == k as u64), "in order, at their positions");
    eprintln!("{uri}: {N} messages through the C ABI, in order");
    Ok(())
}

fn wrong_device() -> Result<(), Failed> {
    let dev = CString::new("no-such-rdma-device")?;
    let o = options(&dev, b"x")?;
    let uri = CString::new("rdma-rc://127.0.0.1:47413/9")?;
    let mut p = std::ptr::null_mut();
    // SAFETY: a NUL-terminated URI, valid options, a writable out-pointer.
    let st = unsafe { tb_publisher_open(uri.as_ptr(), &o, &mut p) };
    assert_eq!(st, tb_status::TB_ERROR_OPEN, "{}", last_error());
    assert!(p.is_null(), "a failed open writes no handle");
    let msg = last_error();
    assert!(msg.contains("no-such-rdma-device"), "{msg}");
    Ok(())
}
