//! tickbus from C++: the sending and receiving ends written in C++ (`cpp/abi_pair.cpp`, with
//! tickbus.hpp) and calling the C ABI of `tickbus-ffi`, on the same reliable shm rings as
//! "tickbus shm (stream API, URI)" (which the C ABI wraps). Beside it in the same rounds: what a
//! C++ app pays for going through the C ABI (calls that cannot be inlined across the language
//! boundary, the handle checks, the panic guard).
use std::error::Error;
use std::ffi::{c_char, CStr, CString};

use crate::bench::peers::tickbus_shm::SLOTS;
use crate::bench::transport::{InProcess, Rx, Tx};

#[repr(C)]
struct CppTx {
    _opaque: [u8; 0],
}

#[repr(C)]
struct CppRx {
    _opaque: [u8; 0],
}

extern "C" {
    fn lab_cpp_last_error() -> *const c_char;
    fn lab_cpp_tx_open(uri: *const c_char, size: usize) -> *mut CppTx;
    fn lab_cpp_tx_send(t: *mut CppTx, stamp: u64) -> i32;
    fn lab_cpp_tx_close(t: *mut CppTx);
    fn lab_cpp_rx_open(uri: *const c_char, size: usize) -> *mut CppRx;
    fn lab_cpp_rx_recv(x: *mut CppRx, stamp: *mut u64) -> i32;
    fn lab_cpp_rx_close(x: *mut CppRx);
}

fn last_error() -> String {
    // SAFETY: returns a NUL-terminated string owned by the calling thread, valid until its next
    // failing call; copied at once.
    unsafe { CStr::from_ptr(lab_cpp_last_error()) }.to_string_lossy().into_owned()
}

#[derive(Default)]
pub struct TickbusCpp {
    made: usize,
}

/// The C++ sending end (owned; one thread at a time, as the C ABI's handles are).
pub struct CppSender {
    t: *mut CppTx,
    _file: RingFile,
}

/// The C++ receiving end.
pub struct CppReceiver {
    x: *mut CppRx,
}

// SAFETY: the C ABI's handles may move between threads (used by one thread at a time, which the
// harness does: each end lives on its own thread).
unsafe impl Send for CppSender {}
// SAFETY: as for CppSender.
unsafe impl Send for CppReceiver {}

impl Tx for CppSender {
    #[inline]
    fn try_send(&mut self, stamp: u64) -> bool {
        // SAFETY: a live handle from lab_cpp_tx_open, used by this thread only.
        match unsafe { lab_cpp_tx_send(self.t, stamp) } {
            1 => true,
            0 => false,
            _ => panic!("C++ sender: {}", last_error()),
        }
    }
}

impl Rx for CppReceiver {
    #[inline]
    fn try_recv(&mut self) -> Option<u64> {
        let mut stamp = 0;
        // SAFETY: a live handle from lab_cpp_rx_open, used by this thread only.
        match unsafe { lab_cpp_rx_recv(self.x, &mut stamp) } {
            1 => Some(stamp),
            0 => None,
            _ => panic!("C++ receiver: {}", last_error()),
        }
    }
}

impl Drop for CppSender {
    fn drop(&mut self) {
        // SAFETY: made by lab_cpp_tx_open, freed once.
        unsafe { lab_cpp_tx_close(self.t) }
    }
}

impl Drop for CppReceiver {
    fn drop(&mut self) {
        // SAFETY: made by lab_cpp_rx_open, freed once.
        unsafe { lab_cpp_rx_close(self.x) }
    }
}

/// Removes the ring's file once the sender is gone (the C ABI opens rings in the default
/// folders, as the stream API row does).
struct RingFile(String);

impl Drop for RingFile {
    fn drop(&mut self) {
        let _ = tickbus::shm::remove(&self.0, &tickbus::shm::ShmOptions::default());
    }
}

impl InProcess for TickbusCpp {
    type Tx = CppSender;
    type Rx = CppReceiver;
    fn name(&self) -> String {
        "tickbus shm (C++ via the C ABI)".into()
    }
    fn note(&self) -> String {
        format!(
            "shm:NAME?reliable&slots={SLOTS}, both ends in C++ (tickbus.hpp) calling libtickbus_ffi's C ABI (version {})",
            tickbus_ffi::tb_abi_version()
        )
    }
    fn channel(&mut self, size: usize, _ticks_per_ns: f64) -> Result<(CppSender, CppReceiver), Box<dyn Error>> {
        let name = format!("lab-cpp-{}-{}", std::process::id(), self.made);
        self.made += 1;
        let uri = CString::new(format!("shm:{name}?reliable&slots={SLOTS}&payload={}", size.max(8)))?;
        // SAFETY: a NUL-terminated URI; the returned handle (or NULL) is owned here.
        let t = unsafe { lab_cpp_tx_open(uri.as_ptr(), size) };
        if t.is_null() {
            return Err(format!("C++ sender: {}", last_error()).into());
        }
        let tx = CppSender { t, _file: RingFile(name) };
        // SAFETY: as above.
        let x = unsafe { lab_cpp_rx_open(uri.as_ptr(), size) };
        if x.is_null() {
            return Err(format!("C++ receiver: {}", last_error()).into());
        }
        Ok((tx, CppReceiver { x }))
    }
}
