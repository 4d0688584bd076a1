//! Exchange data from C: an ITCH 5.0 file or a pcap/pcapng capture of MoldUDP64, normalised into
//! tickbus market-data messages (`tb_order_add`, `tb_order_execute`, ...) exactly as
//! `tickbus feed` and `tickbus exchange` publish them, one message per call.
use core::ffi::c_char;
use std::collections::VecDeque;

use bus::codecs::normalize::Normalizer;
use bus::replay::{self, Source, SourceKind};

use crate::error::{fail, guard, non_null, tb_status};
use crate::handle::{Handle, Kind};
use crate::options::utf8;

/// An ITCH file or capture being read (opaque), from `tb_market_data_open` until
/// `tb_market_data_destroy`; used by one thread at a time.
#[allow(non_camel_case_types)]
pub struct tb_market_data {
    _opaque: [u8; 0],
}

pub(crate) struct MarketData {
    source: Source,
    norm: Normalizer,
    /// Normalised messages of the current exchange message not handed out yet (one ITCH
    /// message may become several), with the source's time.
    pending: VecDeque<(Vec<u8>, u64)>,
    /// The message last handed out (its bytes stay valid until the next call).
    current: Vec<u8>,
    position: u64,
    unparsed: u64,
}

impl Kind for MarketData {
    const MAGIC: u64 = u64::from_le_bytes(*b"tb:mdata");
    const NAME: &'static str = "tb_market_data";
}

/// One normalised market-data message.
#[allow(non_camel_case_types)]
#[repr(C)]
#[derive(Debug, Clone, Copy)]
pub struct tb_md_record {
    /// False at the end of the file.
    pub valid: bool,
    /// Its position among the normalised messages, from 0 (the stream position `tickbus
    /// exchange` would publish it at).
    pub position: u64,
    /// The source's time: ITCH's ns since midnight (exchange time), or a capture's packet time
    /// (ns since the epoch).
    pub source_time_ns: u64,
    /// Exchange messages that did not parse so far (skipped).
    pub unparsed: u64,
    /// The message's bytes (header first: `tb_header.msg_type` says which struct), valid until
    /// the next call on this reader.
    pub data: *const u8,
    /// Its length.
    pub len: usize,
}

/// # Safety
/// `m` is NULL or a handle from this library, not destroyed, used by one thread at a time.
unsafe fn get<'a>(m: *mut tb_market_data) -> Result<&'a mut MarketData, tb_status> {
    // SAFETY: the caller's promise.
    unsafe { Handle::<MarketData>::get(m, "market data") }
}

/// Opens an ITCH 5.0 file or a MoldUDP64 capture (`port`: the capture's UDP port when it holds
/// several; 0 for any). A journal folder is refused: read it with `tb_journal_open`.
///
/// # Safety
/// `path` is NULL or NUL-terminated; `out` is NULL or writable.
#[no_mangle]
pub unsafe extern "C" fn tb_market_data_open(
    path: *const c_char,
    port: u16,
    out: *mut *mut tb_market_data,
) -> tb_status {
    guard(|| {
        non_null(out, "out")?;
        non_null(path, "path")?;
        // SAFETY: non-null; the caller promises NUL-terminated.
        let p = std::path::PathBuf::from(unsafe { utf8(path, "path") }?);
        let source =
            replay::open(&p, None, (port != 0).then_some(port)).map_err(|e| fail!(tb_status::TB_ERROR_OPEN, "{e}"))?;
        if source.kind() == SourceKind::Journal {
            return Err(fail!(
                tb_status::TB_ERROR_INVALID_ARGUMENT,
                "{}: a journal folder: read it with tb_journal_open",
                p.display()
            ));
        }
        let md = MarketData {
            source,
            norm: Normalizer::new(),
            pending: VecDeque::new(),
            current: Vec::new(),
            position: 0,
            unparsed: 0,
        };
        // SAFETY: non-null; the caller promises writable.
        unsafe { out.write(Handle::into_raw(md)) };
        Ok(())
    })
}

/// The next normalised message into `*out` (`valid` false at the end of the file). A damaged
/// file is `TB_ERROR_OPEN` naming where.
///
/// # Safety
/// `m` as every market-data call; `out` is NULL or writable.
#[no_mangle]
pub unsafe extern "C" fn tb_market_data_next(m: *mut tb_market_data, out: *mut tb_md_record) -> tb_status {
    guard(|| {
        // SAFETY: the caller's promise.
        let m = unsafe { get(m) }?;
        non_null(out, "out")?;
        while m.pending.is_empty() {
            let Some(item) = m.source.next().map_err(|e| fail!(tb_status::TB_ERROR_OPEN, "{e}"))? else {
                let end = tb_md_record {
                    valid: false,
                    position: m.position,
                    source_time_ns: 0,
                    unparsed: m.unparsed,
                    data: core::ptr::null(),
                    len: 0,
                };
                // SAFETY: non-null; the caller promises writable.
                unsafe { out.write(end) };
                return Ok(());
            };
            let Ok(msg) = bus::codecs::itch::parse(item.payload, item.sequence) else {
                m.unparsed += 1;
                continue;
            };
            let t = item.time_ns.unwrap_or(0);
            let pending = &mut m.pending;
            m.norm.apply(&msg, &mut |x| pending.push_back((x.as_bytes().to_vec(), t)));
        }
        let (bytes, t) = m.pending.pop_front().expect("not empty");
        m.current = bytes;
        let r = tb_md_record {
            valid: true,
            position: m.position,
            source_time_ns: t,
            unparsed: m.unparsed,
            data: m.current.as_ptr(),
            len: m.current.len(),
        };
        m.position += 1;
        // SAFETY: non-null; the caller promises writable.
        unsafe { out.write(r) };
        Ok(())
    })
}

/// Frees the reader; NULL is ignored.
///
/// # Safety
/// `m` is NULL or a market-data handle not yet destroyed, not in use on another thread.
#[no_mangle]
pub unsafe extern "C" fn tb_market_data_destroy(m: *mut tb_market_data) {
    guard(|| {
        // SAFETY: the caller's promise.
        unsafe { Handle::<MarketData>::destroy(m, "market data") };
        Ok(())
    });
}
