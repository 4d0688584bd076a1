//! Aeron IPC through rusteron-client 0.2.16 with an embedded media driver (rusteron-media-driver,
//! feature `static`): an exclusive publication and a subscription on `aeron:ipc`, each thread
//! with its own client. The driver is off the IPC data path; it runs in shared threading mode
//! with a sleeping idle strategy so it does not take one of the two cores. Its directory
//! (`/dev/shm/aeron-*`) is deleted when the driver stops.
//!
//! rusteron's handles are `Rc`-based (not `Send`), so each end is created by `prepare` on the
//! thread that uses it.
use std::error::Error;
use std::ffi::CString;
use std::time::Duration;

use rusteron_client::{Aeron, AeronContext, AeronExclusivePublication, AeronImage, AeronSubscription, Handlers};
use rusteron_media_driver::bindings::aeron_threading_mode_enum;
use rusteron_media_driver::testing::EmbeddedDriver;

use crate::bench::transport::{message, put_stamp, stamp_of, InProcess, Rx, Tx};

/// Term length of each IPC stream (three terms make the log): 64 KiB keeps it near L2 size.
const CHANNEL: &str = "aeron:ipc?term-length=64k";

pub struct AeronIpc {
    driver: EmbeddedDriver,
    next_stream: i32,
}

impl AeronIpc {
    pub fn launch() -> Result<AeronIpc, Box<dyn Error>> {
        let driver = EmbeddedDriver::launch_with(|c| {
            c.set_threading_mode(aeron_threading_mode_enum::AERON_THREADING_MODE_SHARED)?;
            c.set_shared_idle_strategy(c"sleeping")?;
            c.set_term_buffer_sparse_file(false)?;
            Ok(())
        })
        .map_err(|e| format!("embedded Aeron media driver: {e:?}"))?;
        Ok(AeronIpc { driver, next_stream: 1001 })
    }
}

fn client(dir: &str) -> Result<Aeron, String> {
    let ctx = AeronContext::new().map_err(|e| format!("{e:?}"))?;
    ctx.set_dir(&CString::new(dir).map_err(|e| e.to_string())?).map_err(|e| format!("{e:?}"))?;
    ctx.set_pre_touch_mapped_memory(true).map_err(|e| format!("{e:?}"))?;
    let aeron = Aeron::new(&ctx).map_err(|e| format!("aeron client: {e:?}"))?;
    aeron.start().map_err(|e| format!("aeron client start: {e:?}"))?;
    Ok(aeron)
}

struct TxInner {
    _aeron: Aeron,
    publication: AeronExclusivePublication,
}

pub struct AeronTx {
    dir: String,
    stream: i32,
    buf: Vec<u8>,
    inner: Option<TxInner>,
}

// SAFETY: `inner` (rusteron's Rc-based handles) is None while the value moves between threads;
// `prepare` creates it on the thread that then uses and drops it, so no Rc is shared by threads.
unsafe impl Send for AeronTx {}

impl Tx for AeronTx {
    #[inline]
    fn try_send(&mut self, stamp: u64) -> bool {
        put_stamp(&mut self.buf, stamp);
        let Some(i) = &self.inner else { return false };
        i.publication.offer(&self.buf).is_ok()
    }

    fn prepare(&mut self) -> Result<(), String> {
        let aeron = client(&self.dir)?;
        let channel = CString::new(CHANNEL).expect("no NUL");
        let publication = aeron
            .async_add_exclusive_publication(&channel, self.stream)
            .and_then(|p| p.poll_blocking(Duration::from_secs(10)))
            .map_err(|e| format!("aeron publication: {e:?}"))?;
        self.inner = Some(TxInner { _aeron: aeron, publication });
        Ok(())
    }
}

struct RxInner {
    _aeron: Aeron,
    subscription: AeronSubscription,
    /// The publication's image, once it has connected (the sender may start after us).
    image: Option<AeronImage>,
}

pub struct AeronRx {
    dir: String,
    stream: i32,
    buf: Vec<u8>,
    inner: Option<RxInner>,
}

// SAFETY: as for AeronTx: the Rc-based handles are created by `prepare` on the using thread.
unsafe impl Send for AeronRx {}

impl Rx for AeronRx {
    #[inline]
    fn try_recv(&mut self) -> Option<u64> {
        let i = self.inner.as_mut()?;
        if i.image.is_none() {
            i.image = i.subscription.image_at_index(0);
        }
        let buf = &mut self.buf;
        let mut got = None;
        let _ = i.image.as_ref()?.poll_fn(
            |data, _header| {
                buf[..data.len()].copy_from_slice(data);
                got = Some(stamp_of(buf));
            },
            1,
        );
        got
    }

    fn prepare(&mut self) -> Result<(), String> {
        let aeron = client(&self.dir)?;
        let channel = CString::new(CHANNEL).expect("no NUL");
        let subscription = aeron
            .async_add_subscription(&channel, self.stream, Handlers::NONE, Handlers::NONE)
            .and_then(|s| s.poll_blocking(Duration::from_secs(10)))
            .map_err(|e| format!("aeron subscription: {e:?}"))?;
        self.inner = Some(RxInner { _aeron: aeron, subscription, image: None });
        Ok(())
    }
}

impl InProcess for AeronIpc {
    type Tx = AeronTx;
    type Rx = AeronRx;
    fn name(&self) -> String {
        "Aeron IPC (rusteron 0.2.16)".into()
    }
    fn note(&self) -> String {
        format!("{CHANNEL}, exclusive publication, embedded driver (shared mode, sleeping), one client per thread")
    }
    fn channel(&mut self, size: usize, _: f64) -> Result<(AeronTx, AeronRx), Box<dyn Error>> {
        let stream = self.next_stream;
        self.next_stream += 1;
        let dir = self.driver.dir().to_owned();
        let tx = AeronTx { dir: dir.clone(), stream, buf: message(size), inner: None };
        let rx = AeronRx { dir, stream, buf: message(size), inner: None };
        Ok((tx, rx))
    }
}
