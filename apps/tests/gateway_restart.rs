//! Issue 25 item 16: a gateway's answer to an order is exactly-once across a gateway crash. The
//! first `tickbus gateway` dies (a crash point, `TICKBUS_CRASH`) after publishing its fifth
//! report and before releasing that order; the next gateway on the same rings takes the order
//! again, finds it answered on the report ring and does not answer it twice, and numbers its
//! executions after the first one's. On the code before, the report ring held two final reports
//! for order 5 and the restarted gateway's exchange order ids began at 1 again. This test plays
//! the trader and the feed.
use std::io::{BufRead, BufReader};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use tickbus::shm::{self, HugepagePolicy, ShmOptions};
use tickbus::{Mode, Recv, RingConfig};
use tickbus_codecs::md::Quote;
use tickbus_codecs::orders::NewOrder;
use tickbus_codecs::{decode, AnyMessage, Message, OrdType, Side, TimeInForce, PRICE_SCALE};

const BASE: u64 = 0x5eed << 32;

fn gateway(opts: &ShmOptions, crash: Option<&str>, extra: &[&str]) -> Child {
    let mut c = Command::new(env!("CARGO_BIN_EXE_tickbus"));
    c.args(["gateway", "--md", "md", "--orders", "orders", "--execs", "execs", "--wait-secs", "10", "--json"])
        .args(extra)
        .env("TICKBUS_HUGEPAGE_DIR", &opts.hugepage_dir)
        .env("TICKBUS_SHM_DIR", &opts.fallback_dir)
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    if let Some(point) = crash {
        c.env("TICKBUS_CRASH", point);
    }
    let mut child = c.spawn().unwrap();
    // Ready once it says so (its rings are open, the loop starts next).
    let mut err = BufReader::new(child.stderr.take().unwrap());
    let mut line = String::new();
    while !line.contains("ready") {
        line.clear();
        assert!(err.read_line(&mut line).unwrap() > 0, "the gateway ended before it was ready");
    }
    std::thread::spawn(move || std::io::copy(&mut err, &mut std::io::sink()));
    child
}

fn wait(child: &mut Child, limit: Duration) -> std::process::ExitStatus {
    let t = Instant::now();
    loop {
        if let Some(s) = child.try_wait().unwrap() {
            return s;
        }
        assert!(t.elapsed() < limit, "the gateway did not end within {limit:?}");
        std::thread::sleep(Duration::from_millis(10));
    }
}

#[test]
fn a_gateway_restarted_after_dying_between_report_and_release_answers_no_order_twice() {
    if !cfg!(tickbus_testing) {
        panic!("this test arms a crash point: {}", tickbus_testkit::TESTING_BUILD);
    }
    let tag = format!("tickbus-gw-restart-{}", std::process::id());
    let opts = ShmOptions::new(format!("/dev/hugepages/{tag}"), format!("/dev/shm/{tag}"), HugepagePolicy::Preferred);
    let _gone = Gone(opts.clone());
    let mut md = shm::open_publisher("md", &RingConfig::for_payload(Mode::Lossy, 1, 128, 64), &opts).unwrap();
    let mut ocfg = RingConfig::for_payload(Mode::Reliable, 2, 128, 4096);
    ocfg.max_consumers = 1;
    let mut orders = shm::open_publisher("orders", &ocfg, &opts).unwrap();
    let mut quote = Quote::new();
    (quote.instrument_id, quote.bid_px, quote.bid_qty, quote.ask_px, quote.ask_qty) =
        (2, 10 * PRICE_SCALE, 100, 11 * PRICE_SCALE, 100);
    // A buy below the offer: accepted and expired, each with a new exchange order id.
    let mut send = |n: u64| {
        let mut o = NewOrder::new();
        (o.client_order_id, o.instrument_id, o.side, o.price, o.qty) = (BASE + n, 2, Side::Buy as u8, PRICE_SCALE, 1);
        (o.ord_type, o.time_in_force) = (OrdType::Limit as u8, TimeInForce::ImmediateOrCancel as u8);
        orders.send(&mut o).unwrap();
    };

    let mut first = gateway(&opts, Some("gateway-after-report:5"), &[]);
    md.send(&mut quote).unwrap();
    std::thread::sleep(Duration::from_millis(200)); // the quote is taken before the orders
    let mut execs = shm::open_consumer("execs", &opts).unwrap();
    (1..=5).for_each(&mut send);
    assert_eq!(wait(&mut first, Duration::from_secs(20)).code(), Some(86), "it died at the crash point");

    let mut second = gateway(&opts, None, &["--exit-with-trader"]);
    md.send(&mut quote).unwrap();
    std::thread::sleep(Duration::from_millis(200));
    (6..=10).for_each(&mut send);
    // Every order answered: the trader has all ten reports.
    let mut reports = Vec::new();
    let t = Instant::now();
    while reports.len() < 11 && t.elapsed() < Duration::from_secs(3) {
        match execs.try_recv() {
            Some(Recv::Message(m)) => match decode(m.payload) {
                Ok(AnyMessage::ExecAck(a)) => reports.push((a.client_order_id - BASE, a.exchange_order_id)),
                other => panic!("not the report expected: {other:?}"),
            },
            Some(Recv::Gap(g)) => panic!("a reliable report ring lost {g:?}"),
            None => std::thread::sleep(Duration::from_millis(5)),
        }
    }
    drop(orders); // the trader is done: the second gateway exits
    assert!(wait(&mut second, Duration::from_secs(20)).success());
    let out = second.wait_with_output().unwrap();
    let summary: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    let ids: Vec<u64> = reports.iter().map(|r| r.0).collect();
    assert_eq!(ids, (1..=10).collect::<Vec<_>>(), "each order answered once, in order: {reports:?}");
    let mut exec_ids: Vec<u64> = reports.iter().map(|r| r.1).collect();
    exec_ids.sort_unstable();
    exec_ids.dedup();
    assert_eq!(exec_ids.len(), 10, "execution ids unique across the restart: {reports:?}");
    assert_eq!(summary["counts"]["already_answered"], 1, "{summary}");
    assert_eq!(summary["counts"]["reports"], 5, "{summary}");
}

/// The test's two ring folders, removed with their rings when the test ends, passed or not:
/// `shm::remove` one by one refused the market-data ring (its publisher is the test's own, and
/// alive) and left it and its hugepage behind.
struct Gone(ShmOptions);

impl Drop for Gone {
    fn drop(&mut self) {
        // Unlinked while still mapped is fine: the pages go when the last mapping does.
        let _ = std::fs::remove_dir_all(&self.0.hugepage_dir);
        let _ = std::fs::remove_dir_all(&self.0.fallback_dir);
    }
}
