//! `tickbus._tickbus`: the native half of the `tickbus` Python package. It reads journals, ITCH
//! files and MoldUDP64 captures with the Rust readers and hands Python each message type's
//! messages as one contiguous block of records: the message's fixed-layout bytes followed by
//! its stream position, receive TSC and receive time (ns since the epoch), little-endian u64s.
//! The Python half (`tickbus/__init__.py`) views a block as a numpy structured array without
//! copying, with a dtype built from `layouts()` (the structs' own field offsets) plus those
//! three columns.
//!
//! Research use, not the hot path: the GIL is released while a file is read. Each block is
//! handed to Python as the Rust buffer itself (an object exporting the buffer protocol,
//! read-only), not copied into a `bytes`: numpy's view of it is the only view.
use std::collections::BTreeMap;
use std::path::PathBuf;

use pyo3::exceptions::{PyOSError, PyValueError};
use pyo3::prelude::*;
use pyo3::types::{PyBytes, PyDict, PyList, PyTuple};
use tickbus::journal::{JournalReader, Kind};
use tickbus_codecs::layout::{fields, message_type, size_of_type, snake_name};
use tickbus_codecs::normalize::Normalizer;
use tickbus_codecs::MsgType;

/// One message type's records as they are read: message bytes, position, TSC, time.
#[derive(Default)]
struct Block(Vec<u8>);

impl Block {
    fn push(&mut self, payload: &[u8], position: u64, tsc: u64, ns: u64) {
        self.0.extend_from_slice(payload);
        self.0.extend_from_slice(&position.to_le_bytes());
        self.0.extend_from_slice(&tsc.to_le_bytes());
        self.0.extend_from_slice(&ns.to_le_bytes());
    }
}

/// What a file held, by message type.
#[derive(Default)]
struct Read {
    stream_id: Option<u32>,
    blocks: BTreeMap<u16, Block>,
    gaps: Block,
    undecoded: u64,
}

impl Read {
    fn message(&mut self, payload: &[u8], position: u64, tsc: u64, ns: u64) {
        match message_type(payload) {
            Some(t) => self.blocks.entry(t as u16).or_default().push(payload, position, tsc, ns),
            None => self.undecoded += 1,
        }
    }

    fn into_py<'py>(mut self, py: Python<'py>) -> PyResult<Bound<'py, PyDict>> {
        let d = PyDict::new(py);
        d.set_item("stream_id", self.stream_id)?;
        d.set_item("undecoded", self.undecoded)?;
        let m = PyDict::new(py);
        for (t, b) in std::mem::take(&mut self.blocks) {
            let t = MsgType::from_wire(t).expect("only known types are kept");
            m.set_item(snake_name(t), Bound::new(py, Records(b.0))?)?;
        }
        d.set_item("messages", m)?;
        // Gaps: records of (count, position, TSC, time), four u64s.
        d.set_item("gaps", Bound::new(py, Records(std::mem::take(&mut self.gaps.0)))?)?;
        Ok(d)
    }
}

/// A block of records, lent to Python through the buffer protocol (read-only, one byte per
/// item): `numpy.frombuffer` views it without a copy, and the block lives while any view does.
#[pyclass(frozen)]
struct Records(Vec<u8>);

#[pymethods]
impl Records {
    /// # Safety
    /// Called by Python with a `Py_buffer` to fill.
    unsafe fn __getbuffer__(slf: Bound<'_, Self>, view: *mut pyo3::ffi::Py_buffer, flags: i32) -> PyResult<()> {
        if view.is_null() {
            return Err(pyo3::exceptions::PyBufferError::new_err("no Py_buffer to fill"));
        }
        let data = &slf.get().0;
        // SAFETY: `view` is Python's (checked non-null); the bytes live in the Vec of a frozen
        // object that is never mutated, and FillInfo takes a reference to that object in
        // `view.obj`, so they outlive every view. Read-only: a request for a writable buffer
        // is refused by FillInfo itself.
        let rc = unsafe {
            pyo3::ffi::PyBuffer_FillInfo(
                view,
                slf.as_ptr(),
                data.as_ptr().cast_mut().cast(),
                data.len() as pyo3::ffi::Py_ssize_t,
                1,
                flags,
            )
        };
        if rc != 0 {
            return Err(PyErr::fetch(slf.py()));
        }
        Ok(())
    }

    /// Nothing to free: the view borrows the block, which FillInfo's reference keeps alive.
    unsafe fn __releasebuffer__(&self, _view: *mut pyo3::ffi::Py_buffer) {}

    fn __len__(&self) -> usize {
        self.0.len()
    }
}

fn read_journal_file(path: &std::path::Path, from: Option<u64>) -> Result<Read, String> {
    let r = JournalReader::open(path).map_err(|e| e.to_string())?;
    let mut c = match from {
        Some(s) => r.seek_sequence(s).map_err(|e| e.to_string())?,
        None => r.cursor(),
    };
    let mut out = Read { stream_id: Some(r.stream_id()), ..Read::default() };
    while let Some((rec, wall)) = c.next_timed().map_err(|e| e.to_string())? {
        match rec.kind {
            Kind::Message(p) => out.message(p, rec.sequence, rec.receive_tsc, wall),
            Kind::Gap { count } => out.gaps.push(&count.to_le_bytes(), rec.sequence, rec.receive_tsc, wall),
            Kind::End => {}
        }
    }
    Ok(out)
}

/// Reads a journal folder: every record in stream order, each checked.
///
/// Returns a dict: `stream_id`; `messages`, by type name, a block of records (the message,
/// then its position, receive TSC and receive time in ns since the epoch as little-endian
/// u64s) exporting the buffer protocol; `gaps`, records of (count, position, TSC, time);
/// `undecoded`, records that are no tickbus message.
#[pyfunction]
#[pyo3(signature = (path, from_sequence=None))]
fn read_journal<'py>(py: Python<'py>, path: PathBuf, from_sequence: Option<u64>) -> PyResult<Bound<'py, PyDict>> {
    let r = py.detach(|| read_journal_file(&path, from_sequence)).map_err(PyOSError::new_err)?;
    r.into_py(py)
}

/// Reads an ITCH 5.0 file or a pcap/pcapng capture of MoldUDP64 (`port`: its UDP port, when
/// the capture has several), normalised into tickbus market-data messages as `tickbus feed`
/// publishes them. Positions count the normalised messages from 0; the "receive time" is the
/// source's own time (ITCH: ns since midnight, exchange time; a capture: ns since the epoch)
/// and the TSC column is 0.
#[pyfunction]
#[pyo3(signature = (path, port=None))]
fn read_market_data<'py>(py: Python<'py>, path: PathBuf, port: Option<u16>) -> PyResult<Bound<'py, PyDict>> {
    let r = py
        .detach(|| -> Result<Read, String> {
            let mut src = tickbus::replay::open(&path, None, port).map_err(|e| e.to_string())?;
            if src.kind() == tickbus::replay::SourceKind::Journal {
                return Err(format!("{}: a journal: read it with read_journal", path.display()));
            }
            let mut norm = Normalizer::new();
            let mut out = Read::default();
            let mut position = 0u64;
            while let Some(item) = src.next().map_err(|e| e.to_string())? {
                let Ok(msg) = tickbus_codecs::itch::parse(item.payload, item.sequence) else {
                    out.undecoded += 1;
                    continue;
                };
                let ns = item.time_ns.unwrap_or(0);
                norm.apply(&msg, &mut |m| {
                    out.message(m.as_bytes(), position, 0, ns);
                    position += 1;
                });
            }
            Ok(out)
        })
        .map_err(PyOSError::new_err)?;
    r.into_py(py)
}

/// Every message type's layout: {name: {"type": wire number, "size": bytes, "fields":
/// [(field, offset, numpy type)]}}, from the Rust structs.
#[pyfunction]
fn layouts(py: Python<'_>) -> PyResult<Bound<'_, PyDict>> {
    let d = PyDict::new(py);
    for t in MsgType::ALL {
        let e = PyDict::new(py);
        e.set_item("type", t as u16)?;
        e.set_item("size", size_of_type(t))?;
        let f = PyList::empty(py);
        for x in fields(t) {
            f.append((x.name, x.offset, x.kind.numpy()))?;
        }
        e.set_item("fields", f)?;
        d.set_item(snake_name(t), e)?;
    }
    Ok(d)
}

/// A subscriber of one stream, for research (polling from Python is not the hot path).
#[pyclass(unsendable)]
struct Subscriber {
    s: tickbus::stream::AnySubscriber,
}

#[pymethods]
impl Subscriber {
    /// Opens the stream `uri` names (`shm:md`, ...), waiting up to `wait_secs` for it. A lossy
    /// subscriber starts at the next message published unless `oldest`.
    #[new]
    #[pyo3(signature = (uri, wait_secs=30.0, oldest=false))]
    fn new(py: Python<'_>, uri: &str, wait_secs: f64, oldest: bool) -> PyResult<Self> {
        let c = tickbus::stream::Channel::parse(uri).map_err(|e| PyValueError::new_err(e.to_string()))?;
        let mut o = tickbus::stream::OpenOptions::default();
        o.wait = std::time::Duration::try_from_secs_f64(wait_secs.max(0.0))
            .map_err(|_| PyValueError::new_err(format!("wait_secs = {wait_secs}: give a finite number of seconds")))?;
        if oldest {
            o.start_at = tickbus::StartAt::Oldest;
        }
        let s =
            py.detach(|| tickbus::stream::open_subscriber(&c, &o)).map_err(|e| PyOSError::new_err(e.to_string()))?;
        Ok(Subscriber { s })
    }

    /// The next message as (position, bytes), a gap as ("gap", first lost, resumed at), or None.
    fn poll<'py>(&mut self, py: Python<'py>) -> PyResult<Option<Bound<'py, PyTuple>>> {
        use tickbus::stream::Subscribe;
        match self.s.try_recv().map_err(|e| PyOSError::new_err(e.to_string()))? {
            None => Ok(None),
            Some(tickbus::Recv::Message(m)) => Ok(Some(PyTuple::new(
                py,
                [m.position.into_pyobject(py)?.into_any(), PyBytes::new(py, m.payload).into_any()],
            )?)),
            Some(tickbus::Recv::Gap(g)) => Ok(Some(PyTuple::new(
                py,
                [
                    "gap".into_pyobject(py)?.into_any(),
                    g.expected.into_pyobject(py)?.into_any(),
                    g.resumed_at.into_pyobject(py)?.into_any(),
                ],
            )?)),
        }
    }

    /// The position of the next message.
    #[getter]
    fn position(&self) -> u64 {
        use tickbus::stream::Subscribe;
        self.s.position()
    }

    /// Positions lost in gaps so far.
    #[getter]
    fn missed(&self) -> u64 {
        use tickbus::stream::Subscribe;
        self.s.missed()
    }
}

#[pymodule]
fn _tickbus(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add_function(wrap_pyfunction!(read_journal, m)?)?;
    m.add_function(wrap_pyfunction!(read_market_data, m)?)?;
    m.add_function(wrap_pyfunction!(layouts, m)?)?;
    m.add_class::<Subscriber>()?;
    m.add_class::<Records>()?;
    Ok(())
}
