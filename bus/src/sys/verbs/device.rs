//! Opening a device, its port, and choosing the GID RoCE v2 traffic uses.
use std::ffi::CStr;
use std::sync::{Arc, Mutex};

use rdma_sys as ffi;

use super::error::VerbsError;
use super::events::{AsyncEvents, Watcher};

/// Names of the RDMA devices present (empty without a provider or device).
pub fn device_names() -> Vec<String> {
    let mut n = 0;
    // SAFETY: ibv_get_device_list writes the count to `n` and returns NULL or an array of `n`
    // device pointers, which we free with ibv_free_device_list before returning.
    unsafe {
        let list = ffi::ibv_get_device_list(&mut n);
        if list.is_null() {
            return Vec::new();
        }
        let names = (0..n as usize)
            .map(|i| CStr::from_ptr(ffi::ibv_get_device_name(*list.add(i))).to_string_lossy().into_owned())
            .collect();
        ffi::ibv_free_device_list(list);
        names
    }
}

pub use crate::sys::addr::Gid;

/// A GID as libibverbs takes it.
pub(crate) fn gid_to_ffi(g: Gid) -> ffi::ibv_gid {
    ffi::ibv_gid { raw: g.0 }
}

/// What the transport needs to know about the port it uses.
#[derive(Debug, Clone, Copy)]
pub struct PortInfo {
    /// The port number (from 1).
    pub port: u8,
    /// The GID table index used (a RoCE v2 IPv4 GID).
    pub gid_index: u8,
    /// The GID at that index.
    pub gid: Gid,
    /// Active MTU as the verbs enum (IBV_MTU_1024 = 3, ...).
    pub active_mtu: u32,
    /// The largest message the port carries.
    pub max_msg_sz: u32,
}

impl PortInfo {
    /// The active MTU in bytes (the verbs enum: IBV_MTU_256 = 1 ... IBV_MTU_4096 = 5): the
    /// largest UD datagram, and the packet size RC messages are cut into.
    pub fn mtu_bytes(&self) -> usize {
        128usize << self.active_mtu.clamp(1, 5)
    }
}

/// An open device with one protection domain: everything tickbus registers on a device shares it.
pub struct Context {
    pub(crate) ctx: *mut ffi::ibv_context,
    pub(crate) pd: *mut ffi::ibv_pd,
    name: String,
    port: PortInfo,
    /// The thread reading the device's async events, once someone asked for them.
    watcher: Mutex<Option<Watcher>>,
}

// SAFETY: libibverbs contexts and PDs are thread-safe per the verbs API; we never hand out
// mutable aliases of the pointers.
unsafe impl Send for Context {}
// SAFETY: as above.
unsafe impl Sync for Context {}

impl Context {
    /// Opens device `name` (or the first device), port 1, and picks its RoCE v2 IPv4 GID (or
    /// `TICKBUS_RDMA_GID_INDEX` if set).
    pub fn open(name: Option<&str>) -> Result<Arc<Context>, VerbsError> {
        let port = 1u8;
        let mut n = 0;
        // SAFETY: see device_names; the list is freed on every path below, after the device we
        // open (which stays valid while its context is open) has been opened.
        let ctx = unsafe {
            let list = ffi::ibv_get_device_list(&mut n);
            if list.is_null() {
                return Err(VerbsError::NoDevice { name: name.map(str::to_owned) });
            }
            let dev = (0..n as usize).map(|i| *list.add(i)).find(|d| match name {
                None => true,
                Some(want) => CStr::from_ptr(ffi::ibv_get_device_name(*d)).to_bytes() == want.as_bytes(),
            });
            let ctx = dev.map(|d| ffi::ibv_open_device(d));
            ffi::ibv_free_device_list(list);
            match ctx {
                None => return Err(VerbsError::NoDevice { name: name.map(str::to_owned) }),
                Some(c) if c.is_null() => return Err(VerbsError::last("ibv_open_device")),
                Some(c) => c,
            }
        };
        // SAFETY: ctx is an open context; the device pointer inside it is valid while it is.
        let dev_name =
            unsafe { CStr::from_ptr(ffi::ibv_get_device_name((*ctx).device)).to_string_lossy().into_owned() };
        // SAFETY: ctx is open; a zeroed ibv_port_attr is a valid out-parameter.
        let attr = unsafe {
            let mut attr: ffi::ibv_port_attr = std::mem::zeroed();
            let rc = ffi::ibv_query_port(ctx, port, &mut attr as *mut _ as *mut _);
            if rc != 0 {
                ffi::ibv_close_device(ctx);
                return Err(VerbsError::code("ibv_query_port", rc));
            }
            attr
        };
        let close = |e| {
            // SAFETY: ctx is open and nothing else references it yet.
            unsafe { ffi::ibv_close_device(ctx) };
            Err(e)
        };
        if attr.state != ffi::ibv_port_state::IBV_PORT_ACTIVE {
            return close(VerbsError::PortDown { device: dev_name, port, state: attr.state });
        }
        let (gid_index, gid) = match pick_gid(ctx, &dev_name, port, attr.gid_tbl_len) {
            Ok(g) => g,
            Err(e) => return close(e),
        };
        // SAFETY: ctx is open.
        let pd = unsafe { ffi::ibv_alloc_pd(ctx) };
        if pd.is_null() {
            return close(VerbsError::last("ibv_alloc_pd"));
        }
        let port = PortInfo { port, gid_index, gid, active_mtu: attr.active_mtu, max_msg_sz: attr.max_msg_sz };
        Ok(Arc::new(Context { ctx, pd, name: dev_name, port, watcher: Mutex::new(None) }))
    }

    /// The device's name (e.g. `rxe0`, `mlx5_0`).
    pub fn name(&self) -> &str {
        &self.name
    }

    /// The port in use.
    pub fn port(&self) -> &PortInfo {
        &self.port
    }

    /// The device's async events (port down or up, QPs gone fatal), read by a thread this
    /// starts on first use and stops when the context closes (set-up path).
    pub fn async_events(&self) -> Result<Arc<AsyncEvents>, VerbsError> {
        let mut w = self.watcher.lock().unwrap_or_else(|e| e.into_inner());
        if let Some(w) = w.as_ref() {
            return Ok(w.events.clone());
        }
        // SAFETY: self.ctx is open until Drop, which stops the watcher first.
        let started = unsafe { Watcher::start(self.ctx, &self.name) }
            .map_err(|source| VerbsError::Call { call: "watching the device's async events", source })?;
        let events = started.events.clone();
        *w = Some(started);
        Ok(events)
    }
}

impl Drop for Context {
    fn drop(&mut self) {
        // The watcher reads events from the context: it stops before the context closes.
        if let Some(mut w) = self.watcher.get_mut().ok().and_then(Option::take) {
            w.stop();
        }
        // SAFETY: every object created from this PD/context holds an Arc<Context>, so none is
        // left when the last Arc drops here.
        unsafe {
            ffi::ibv_dealloc_pd(self.pd);
            ffi::ibv_close_device(self.ctx);
        }
    }
}

/// The GID index RoCE v2 over IPv4 uses: the first whose sysfs type is "RoCE v2" and whose GID is
/// IPv4-mapped. `TICKBUS_RDMA_GID_INDEX` overrides.
fn pick_gid(ctx: *mut ffi::ibv_context, dev: &str, port: u8, len: i32) -> Result<(u8, Gid), VerbsError> {
    let query = |i: i32| -> Option<Gid> {
        // SAFETY: ctx is open; `g` is a valid out-parameter.
        unsafe {
            let mut g: ffi::ibv_gid = std::mem::zeroed();
            (ffi::ibv_query_gid(ctx, port, i, &mut g) == 0).then_some(Gid(g.raw))
        }
    };
    if let Some(i) = std::env::var("TICKBUS_RDMA_GID_INDEX").ok().and_then(|v| v.parse::<i32>().ok()) {
        return query(i).map(|g| (i as u8, g)).ok_or(VerbsError::NoGid { device: dev.to_owned(), port });
    }
    (0..len.min(256))
        .filter_map(|i| {
            let ty = std::fs::read_to_string(format!("/sys/class/infiniband/{dev}/ports/{port}/gid_attrs/types/{i}"))
                .ok()?;
            let g = query(i)?;
            (ty.trim() == "RoCE v2" && g.ipv4().is_some()).then_some((i as u8, g))
        })
        .next()
        .ok_or(VerbsError::NoGid { device: dev.to_owned(), port })
}
