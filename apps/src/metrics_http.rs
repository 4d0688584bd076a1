//! `tickbus stat --listen`: the /metrics endpoint, on hyper (HTTP/1.1) over a small tokio
//! runtime. Every connection is served on its own task, so idle or slow clients never hold up a
//! scrape; each has a deadline for its request head and one for the whole connection, and at
//! most [`MAX_CONNECTIONS`] are open at once (the rest wait in the listen backlog).
//!
//! Owns: the HTTP side only. Never: reads a counter itself (each scrape calls `snapshot`).
use std::convert::Infallible;
use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Duration;

use http_body_util::Full;
use hyper::body::Bytes;
use hyper::{Method, Request, Response, StatusCode};
use hyper_util::rt::{TokioIo, TokioTimer};
use tickbus::shm::ShmOptions;
use tickbus::stat::{prometheus, snapshot, CONTENT_TYPE};

/// Most connections served at once (each costs a descriptor and a task).
pub const MAX_CONNECTIONS: usize = 64;
/// A client has this long to send its request head (a slow or idle client is cut off).
pub const HEAD_DEADLINE: Duration = Duration::from_secs(2);
/// A connection is closed after this long, whatever it is doing (a client reading its reply a
/// byte at a time included).
pub const CONNECTION_DEADLINE: Duration = Duration::from_secs(10);

/// Serves GET /metrics on `addr` until `stop` is set or `count` scrapes have been answered.
/// Says where on stderr once listening (tests read that line for the port).
pub fn serve(
    addr: &str,
    dirs: &[PathBuf],
    opts: &ShmOptions,
    count: Option<u64>,
    stop: &AtomicBool,
) -> Result<(), String> {
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_io()
        .enable_time()
        .build()
        .map_err(|e| format!("starting the HTTP server: {e}"))?;
    let std_listener = std::net::TcpListener::bind(addr).map_err(|e| format!("--listen {addr}: {e}"))?;
    std_listener.set_nonblocking(true).map_err(|e| e.to_string())?;
    let local = std_listener.local_addr().map_err(|e| e.to_string())?;
    let ctx = Arc::new(Ctx { dirs: dirs.to_vec(), opts: opts.clone(), served: AtomicU64::new(0), count });
    rt.block_on(async move {
        let listener = tokio::net::TcpListener::from_std(std_listener).map_err(|e| e.to_string())?;
        eprintln!("tickbus stat: serving Prometheus metrics on http://{local}/metrics");
        let slots = Arc::new(tokio::sync::Semaphore::new(MAX_CONNECTIONS));
        let done = Arc::new(tokio::sync::Notify::new());
        loop {
            if stop.load(Ordering::Acquire) || ctx.finished() {
                break;
            }
            let permit = tokio::select! {
                p = slots.clone().acquire_owned() => p.map_err(|e| e.to_string())?,
                _ = tokio::time::sleep(Duration::from_millis(100)) => continue,
            };
            let conn = tokio::select! {
                c = listener.accept() => c,
                _ = done.notified() => break,
                // Look at the stop flag now and then (Ctrl-C sets it from another thread).
                _ = tokio::time::sleep(Duration::from_millis(100)) => continue,
            };
            let Ok((stream, _)) = conn else { continue };
            let (ctx, done) = (ctx.clone(), done.clone());
            tokio::spawn(async move {
                let _permit = permit;
                let svc = hyper::service::service_fn(|req| {
                    let ctx = ctx.clone();
                    async move { Ok::<_, Infallible>(ctx.answer(&req)) }
                });
                let conn = hyper::server::conn::http1::Builder::new()
                    .timer(TokioTimer::new())
                    .header_read_timeout(HEAD_DEADLINE)
                    .keep_alive(false)
                    .serve_connection(TokioIo::new(stream), svc);
                let _ = tokio::time::timeout(CONNECTION_DEADLINE, conn).await;
                if ctx.finished() {
                    done.notify_one();
                }
            });
        }
        // Let the scrapes in flight finish writing (the last one counted included).
        let _ = tokio::time::timeout(CONNECTION_DEADLINE, slots.acquire_many(MAX_CONNECTIONS as u32)).await;
        Ok::<_, String>(())
    })
}

struct Ctx {
    dirs: Vec<PathBuf>,
    opts: ShmOptions,
    served: AtomicU64,
    count: Option<u64>,
}

impl Ctx {
    fn finished(&self) -> bool {
        self.count.is_some_and(|c| self.served.load(Ordering::Acquire) >= c)
    }

    fn answer(&self, req: &Request<hyper::body::Incoming>) -> Response<Full<Bytes>> {
        let reply = |status: StatusCode, ty: &str, body: String| {
            let mut r = Response::new(Full::new(Bytes::from(body)));
            *r.status_mut() = status;
            if let Ok(v) = ty.parse() {
                r.headers_mut().insert(hyper::header::CONTENT_TYPE, v);
            }
            r
        };
        if req.method() != Method::GET && req.method() != Method::HEAD {
            return reply(StatusCode::METHOD_NOT_ALLOWED, "text/plain", "GET /metrics\n".into());
        }
        if req.uri().path() != "/metrics" && req.uri().path() != "/" {
            return reply(StatusCode::NOT_FOUND, "text/plain", "tickbus stat serves /metrics\n".into());
        }
        let body = prometheus(&snapshot(&self.dirs, &self.opts));
        self.served.fetch_add(1, Ordering::AcqRel);
        reply(StatusCode::OK, CONTENT_TYPE, body)
    }
}
