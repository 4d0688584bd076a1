//! The trading pipeline as separate processes over shm: `mold-server` (the exchange's feed on
//! two loopback multicast lines) -> `feed` (normalised market data on a lossy ring) -> `trader`
//! (book, decision, IOC orders on a reliable ring) -> `gateway` (one execution report per order
//! on a reliable ring, back to the trader). Counts are exact: every tick the feed published is
//! seen, every order reaches the gateway and gets exactly one report. A trader killed mid-run is
//! reported by the gateway, and the feed and the gateway carry on.
use std::io::{BufRead, BufReader};
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::sync::Mutex;
use std::time::Duration;

static ONE: Mutex<()> = Mutex::new(());

struct Env {
    /// Every process started, killed when the test ends (a failed test leaves none behind).
    children: Mutex<Vec<u32>>,
    tag: String,
    tmp: PathBuf,
    day: PathBuf,
    lines: [String; 6],
}

impl Env {
    fn new(name: &str, n: u16, messages: &str) -> Env {
        let tag = format!("tickbus-trading-{name}-{}", std::process::id());
        let tmp = std::env::temp_dir().join(&tag);
        let _ = std::fs::remove_dir_all(&tmp);
        std::fs::create_dir_all(&tmp).unwrap();
        let lines = [
            "--line-a".into(),
            format!("239.77.40.{n}:{}", 35000 + n),
            "--line-b".into(),
            format!("239.77.41.{n}:{}", 36000 + n),
            "--retransmit".into(),
            format!("127.0.0.1:{}", 37000 + n),
        ];
        let env = Env { children: Mutex::new(Vec::new()), day: tmp.join("day.itch"), tmp, tag, lines };
        let day = env.day.to_str().unwrap().to_owned();
        let gen = ["itch", "generate", "--seed", "5", "--stocks", "8", "--messages", messages, "--itch", &day];
        assert!(env.cmd(&gen).output().unwrap().status.success());
        env
    }

    fn cmd(&self, args: &[&str]) -> Command {
        let mut c = Command::new(env!("CARGO_BIN_EXE_tickbus"));
        c.args(args)
            .env("TICKBUS_HUGEPAGE_DIR", format!("/dev/hugepages/{}", self.tag))
            .env("TICKBUS_SHM_DIR", format!("/dev/shm/{}", self.tag));
        c
    }

    fn spawn(&self, args: &[&str]) -> Child {
        let child = self.cmd(args).stdout(Stdio::piped()).stderr(Stdio::piped()).spawn().unwrap();
        self.children.lock().unwrap().push(child.id());
        child
    }

    /// Feed, gateway and trader started, each waiting for its rings; returns them once the
    /// trader and the gateway say they are ready.
    fn start(&self, gateway_args: &[&str]) -> (Child, Child, Child) {
        let mut feed_args = vec!["feed", "--ring", "md", "--exit-at-end", "--give-up-ms", "1500", "--json"];
        feed_args.extend(self.lines.iter().map(String::as_str));
        let feed = self.spawn(&feed_args);
        let mut gw_args = vec!["gateway", "--json"];
        gw_args.extend(gateway_args);
        let mut gateway = self.spawn(&gw_args);
        let mut trader = self.spawn(&["trader", "--json"]);
        for (who, child) in [("gateway", &mut gateway), ("trader", &mut trader)] {
            let line = first_line(child);
            assert!(line.contains("ready"), "{who}: {line}");
        }
        (feed, gateway, trader)
    }

    fn serve(&self, rate: &str) -> serde_json::Value {
        let day = self.day.to_str().unwrap();
        let mut args =
            vec!["mold-server", day, "--rate", rate, "--linger-ms", "1500", "--start-delay-ms", "200", "--json"];
        args.extend(self.lines.iter().map(String::as_str));
        let out = self.cmd(&args).output().unwrap();
        assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
        serde_json::from_slice(&out.stdout).unwrap()
    }
}

impl Drop for Env {
    fn drop(&mut self) {
        for pid in self.children.lock().unwrap_or_else(|e| e.into_inner()).iter() {
            // Only a child not yet reaped is still ours (its parent is this process, and its pid
            // cannot be reused until we reap it); one already waited for is left alone.
            let ppid = std::fs::read_to_string(format!("/proc/{pid}/stat"))
                .ok()
                .and_then(|s| s.rsplit_once(") ").and_then(|(_, rest)| rest.split(' ').nth(1)?.parse::<u32>().ok()));
            if ppid == Some(std::process::id()) {
                // SAFETY: SIGKILL to our own unreaped child (checked just above); no memory is involved.
                unsafe { libc::kill(*pid as i32, libc::SIGKILL) };
            }
        }
        let _ = std::fs::remove_dir_all(&self.tmp);
        let _ = std::fs::remove_dir_all(format!("/dev/hugepages/{}", self.tag));
        let _ = std::fs::remove_dir_all(format!("/dev/shm/{}", self.tag));
    }
}

/// The first stderr line of a child (its stderr is then read on by a thread, kept in order).
fn first_line(child: &mut Child) -> String {
    let mut r = BufReader::new(child.stderr.take().unwrap());
    let mut line = String::new();
    r.read_line(&mut line).unwrap();
    child.stderr = None;
    let rest = std::thread::spawn(move || {
        let mut all = String::new();
        while r.read_line(&mut all).map(|n| n > 0).unwrap_or(false) {}
        all
    });
    STDERR.lock().unwrap().push((child.id(), rest));
    line
}

type Rest = std::thread::JoinHandle<String>;
static STDERR: Mutex<Vec<(u32, Rest)>> = Mutex::new(Vec::new());

/// What a child printed on stderr after its first line (it must have exited).
fn stderr_of(pid: u32) -> String {
    let mut all = STDERR.lock().unwrap();
    let k = all.iter().position(|(p, _)| *p == pid).expect("read by first_line");
    all.remove(k).1.join().unwrap()
}

fn finish(child: Child, what: &str) -> serde_json::Value {
    let pid = child.id();
    let out = child.wait_with_output().unwrap();
    let taken = STDERR.lock().unwrap().iter().any(|(p, _)| *p == pid);
    let err = if taken { stderr_of(pid) } else { String::from_utf8_lossy(&out.stderr).into_owned() };
    assert!(out.status.success(), "{what} failed: {err}");
    serde_json::from_slice(&out.stdout)
        .unwrap_or_else(|e| panic!("{what}: {e}: {}", String::from_utf8_lossy(&out.stdout)))
}

fn n(v: &serde_json::Value, path: &[&str]) -> u64 {
    path.iter().fold(v, |v, k| &v[k]).as_u64().unwrap_or_else(|| panic!("no {path:?} in {v}"))
}

#[test]
fn every_tick_is_seen_and_every_order_gets_exactly_one_report() {
    let _one = ONE.lock().unwrap_or_else(|e| e.into_inner());
    let env = Env::new("counts", 1, "20000");
    let (feed, gateway, trader) = env.start(&["--exit-with-trader"]);
    let server = env.serve("20000");
    let feed = finish(feed, "feed");
    let trader = finish(trader, "trader");
    let gateway = finish(gateway, "gateway");
    assert_eq!((n(&feed, &["lost"]), n(&feed, &["delivered"])), (0, n(&server, &["messages"])));
    let published = n(&feed, &["published"]);
    assert_eq!(n(&trader, &["counts", "ticks"]), published, "every tick the feed published reached the trader");
    assert_eq!(n(&trader, &["counts", "md_missed"]), 0);
    let orders = n(&trader, &["counts", "orders"]);
    assert!(orders > 100, "{trader}");
    assert_eq!(n(&trader, &["counts", "reports"]), orders, "one report per order, back at the trader");
    assert_eq!((n(&trader, &["counts", "reports_unexpected"]), n(&trader, &["in_flight"])), (0, 0));
    assert_eq!(n(&gateway, &["counts", "orders"]), orders, "every order reached the gateway");
    assert_eq!(n(&gateway, &["counts", "reports"]), orders);
    let answered = ["fills", "expired", "rejects"].iter().map(|k| n(&gateway, &["counts", k])).sum::<u64>();
    assert_eq!(answered, orders, "each order answered once");
    assert_eq!(n(&gateway, &["counts", "fills"]), n(&trader, &["strategy", "filled_orders"]));
    assert_eq!((n(&gateway, &["counts", "malformed"]), n(&gateway, &["unordered_traces"])), (0, 0));
    for hop in gateway["hops_ns"].as_array().unwrap() {
        assert_eq!(hop["count"].as_u64(), Some(orders), "every order timed on every hop: {hop}");
    }
    // The feed handler stamps its ingress and when each publish began (its publish lag): every
    // order is timed from the publish too. (The p50 check below holds by construction once the
    // count does: a publish begins after its ingress. What can fail here is the count.)
    let from_publish = &gateway["ttt_from_publish_ns"];
    assert_eq!(from_publish["count"].as_u64(), Some(orders), "every order timed from its tick's publish: {gateway}");
    let whole = gateway["hops_ns"].as_array().unwrap().last().unwrap();
    assert!(
        n(from_publish, &["p50"]) <= n(whole, &["p50"]),
        "from the publish longer than from the ingress: {gateway}"
    );
}

#[test]
fn a_killed_trader_is_reported_and_the_feed_and_gateway_carry_on() {
    let _one = ONE.lock().unwrap_or_else(|e| e.into_inner());
    let env = Env::new("kill", 2, "20000");
    let (feed, gateway, mut trader) = env.start(&[]);
    let server = std::thread::scope(|s| {
        let server = s.spawn(|| env.serve("8000"));
        std::thread::sleep(Duration::from_millis(1200)); // trading is under way
        trader.kill().unwrap(); // SIGKILL: no chance to close anything
        trader.wait().unwrap();
        server.join().unwrap()
    });
    let feed = finish(feed, "feed");
    assert_eq!((n(&feed, &["lost"]), n(&feed, &["delivered"])), (0, n(&server, &["messages"])), "the feed carried on");
    // The gateway looks at its peers when idle (every 20 ms once no work comes): give it time.
    std::thread::sleep(Duration::from_millis(500));
    assert!(still_running(&gateway), "the gateway carried on after the trader died");
    // SAFETY: sends SIGTERM to our own child, which is still running (checked just above).
    assert_eq!(unsafe { libc::kill(gateway.id() as i32, libc::SIGTERM) }, 0);
    let gw_pid = gateway.id();
    let out = gateway.wait_with_output().unwrap();
    assert!(out.status.success(), "the gateway stops cleanly on SIGTERM");
    let gw: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    let said = stderr_of(gw_pid);
    assert!(said.contains("died after") && said.contains("waiting for a trader"), "{said}");
    assert_eq!(n(&gw, &["counts", "trader_deaths"]), 1);
    let orders = n(&gw, &["counts", "orders"]);
    assert!(orders > 0, "{gw}");
    assert_eq!(n(&gw, &["counts", "reports"]), orders, "every order the dead trader sent was answered");
}

/// Whether the child is still running (not exited, not a zombie), without reaping it.
fn still_running(child: &Child) -> bool {
    std::fs::read_to_string(format!("/proc/{}/stat", child.id())).is_ok_and(|s| !s.contains(") Z "))
}

/// `tickbus exchange` (the ITCH day as market data, open loop, with the gateway as a second agent
/// on its core) and `tickbus trader` as two processes; then the same with the gateway as its own
/// process (`--no-gateway` + `tickbus gateway`). Counts are exact in both layouts.
#[test]
fn the_exchange_process_trades_with_the_trader_in_both_layouts() {
    let _one = ONE.lock().unwrap_or_else(|e| e.into_inner());
    let env = Env::new("exchange", 3, "20000");
    let day = env.day.to_str().unwrap().to_owned();
    for split in [false, true] {
        let rings = if split {
            ["--md", "md2", "--orders", "orders2", "--execs", "execs2"]
        } else {
            ["--md", "md1", "--orders", "orders1", "--execs", "execs1"]
        };
        let mut ex_args = vec!["exchange", "--itch", &day, "--rate", "50000", "--json"];
        if split {
            ex_args.push("--no-gateway");
        }
        ex_args.extend(rings);
        let exchange = env.spawn(&ex_args);
        let gateway = split.then(|| {
            let mut a = vec!["gateway", "--exit-with-trader", "--json"];
            a.extend(rings);
            env.spawn(&a)
        });
        let mut t = vec!["trader", "--json"];
        t.extend(rings);
        let trader = env.spawn(&t);
        let trader = finish(trader, "trader");
        let exchange = finish(exchange, "exchange");
        let gateway = match gateway {
            Some(g) => finish(g, "gateway"),
            None => exchange["gateway"].clone(),
        };
        let layout = if split { "three processes" } else { "two processes" };
        let published = n(&exchange, &["md", "published"]);
        assert!(n(&exchange, &["md", "itch"]) > 20_000 && published > 20_000, "{layout}: {exchange}");
        assert_eq!(n(&exchange, &["md", "unparsed"]), 0);
        assert_eq!(n(&trader, &["counts", "ticks"]), published, "{layout}: every tick reached the trader");
        assert_eq!(n(&trader, &["counts", "md_missed"]), 0, "{layout}");
        assert_eq!(n(&trader, &["tick_hop_ns", "count"]), published, "{layout}: every tick timed");
        let orders = n(&trader, &["counts", "orders"]);
        assert!(orders > 100, "{layout}: {trader}");
        assert_eq!(n(&trader, &["counts", "reports"]), orders, "{layout}: one report per order");
        assert_eq!((n(&trader, &["counts", "reports_unexpected"]), n(&trader, &["in_flight"])), (0, 0));
        assert_eq!(n(&gateway, &["counts", "orders"]), orders, "{layout}: every order reached the gateway");
        assert_eq!(n(&gateway, &["counts", "reports"]), orders, "{layout}");
        let answered = ["fills", "expired", "rejects"].iter().map(|k| n(&gateway, &["counts", k])).sum::<u64>();
        assert_eq!(answered, orders, "{layout}: each order answered once");
        assert!(n(&gateway, &["counts", "quotes"]) > 0, "{layout}: the gateway matched against quotes");
        assert_eq!(n(&gateway, &["counts", "fills"]), n(&trader, &["strategy", "filled_orders"]), "{layout}");
        for hop in gateway["hops_ns"].as_array().unwrap() {
            assert_eq!(hop["count"].as_u64(), Some(orders), "{layout}: every order timed on every hop: {hop}");
        }
        // Tick-to-trade from the market data's publish as well: every order (the venue says
        // when each publish began), and shorter than from the tick's due time by the venue's
        // own work before the publish.
        let from_publish = &gateway["ttt_from_publish_ns"];
        assert_eq!(from_publish["count"].as_u64(), Some(orders), "{layout}: {from_publish}");
        assert!(
            n(&gateway, &["ttt_from_publish_ns", "p50"]) < gateway["hops_ns"][5]["p50"].as_u64().unwrap(),
            "{layout}: {gateway}"
        );
        assert_eq!(n(&exchange, &["feed_ns", "count"]), published, "{layout}");
    }
}

#[test]
fn the_exchange_refuses_what_it_cannot_replay() {
    let env = Env::new("exchange-bad", 4, "100");
    let out = env.cmd(&["exchange", "--itch", "/nonexistent/day.itch"]).output().unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success() && err.contains("/nonexistent/day.itch"), "{err}");
    let out = env.cmd(&["exchange", "--itch", env.day.to_str().unwrap(), "--rate", "0"]).output().unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success() && err.contains("--rate"), "{err}");
    // No trader: it says whom it waited for, instead of replaying to nobody.
    let out = env
        .cmd(&[
            "exchange",
            "--itch",
            env.day.to_str().unwrap(),
            "--wait-secs",
            "0.3",
            "--md",
            "m",
            "--orders",
            "o",
            "--execs",
            "e",
        ])
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success() && err.contains("tickbus trader"), "{err}");
}
