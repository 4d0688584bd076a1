//! `tickbus stat` against live rdma-rc and ud-mcast streams (the Soft-RoCE guest: rxe0 and
//! rxe1). A helper process holds both ends of each stream and reports what it did and saw;
//! stat must report exactly that: positions, messages, back-pressure, lag, multicast gaps,
//! losses, datagrams and heartbeats. Ignored (with the reason) on a host without two RDMA
//! devices; a failure in the guest, where TICKBUS_REQUIRE_RDMA=1 is set.
use std::io::{BufRead, BufReader, Read, Write};
use std::net::Ipv4Addr;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use libtest_mimic::{Arguments, Failed, Trial};
use serde_json::Value;
use tickbus::mcast::{McastPublisher, McastPublisherOptions, McastSubscriber, McastSubscriberOptions};
use tickbus::rdma::{PublisherOptions, RdmaError, RdmaPublisher, RdmaSubscriber, SubscriberOptions};
use tickbus::{Mode, Recv, RingConfig};

const ROLE: &str = "TICKBUS_STAT_RDMA_ROLE";
const TOKEN: &str = "stat-rdma-test";
const GROUP: Ipv4Addr = Ipv4Addr::new(239, 77, 60, 1);

fn devices() -> Vec<String> {
    tickbus::rdma::device_names()
}

fn main() {
    if std::env::var_os(ROLE).is_some() {
        if let Err(e) = helper() {
            eprintln!("stat_rdma helper: {e}");
            std::process::exit(1);
        }
        return;
    }
    let mut args = Arguments::from_args();
    args.test_threads = Some(1);
    let skip = devices().len() < 2 && std::env::var_os("TICKBUS_REQUIRE_RDMA").is_none();
    if skip {
        eprintln!("stat_rdma: needs two RDMA devices (the Soft-RoCE guest: tools/test.sh): tests ignored");
    }
    let tests = vec![Trial::test("stat_reports_rdma_rc_and_ud_mcast_streams_exactly", rdma_streams)];
    libtest_mimic::run(&args, tests.into_iter().map(|t| t.with_ignored_flag(skip)).collect()).exit();
}

/// rdma-rc: a reliable 8-slot stream filled until three publishes are refused, five read.
/// ud-mcast: 100 messages at a subscriber with 16 receive slots that is not polling, then
/// drained: what did not fit is one gap, lost for good (no recovery). Prints the counts and
/// holds every stream open until stdin closes.
fn helper() -> Result<(), Box<dyn std::error::Error>> {
    let d = devices();
    let (a, b) = (d.first().cloned().ok_or("no device")?, d.get(1).cloned().ok_or("no second device")?);
    let mut po = PublisherOptions::new(TOKEN);
    po.device = Some(a.clone());
    let cfg = RingConfig::for_payload(Mode::Reliable, 21, 40, 8);
    let mut p = RdmaPublisher::bind("127.0.0.1:0".parse()?, &cfg, po)?;
    let addr = p.local_addr();
    let mut so = SubscriberOptions::new(TOKEN);
    so.device = Some(b.clone());
    let (accepted, sub) = std::thread::scope(|s| {
        let sub = s.spawn(|| RdmaSubscriber::connect(addr, 21, &so));
        (p.accept(Duration::from_secs(60)), sub.join().expect("connect thread"))
    });
    accepted?;
    let mut sub = sub?;
    let msg = [5u8; 40];
    let (mut published, mut full) = (0u64, 0u64);
    let deadline = Instant::now() + Duration::from_secs(60);
    while full < 3 && Instant::now() < deadline {
        match p.publish(&msg) {
            Ok(_) => published += 1,
            Err(RdmaError::Claim(c)) if c.is_retryable() => full += 1,
            Err(e) => return Err(e.into()),
        }
    }
    let mut read = 0u64;
    while read < 5 && Instant::now() < deadline {
        p.poll();
        if let Some(Recv::Message(_)) = sub.try_recv()? {
            read += 1;
        }
    }

    let mut mo = McastPublisherOptions::default();
    mo.device = Some(a);
    let mut mp = McastPublisher::new(GROUP, 22, &mo)?;
    let mut mso = McastSubscriberOptions::default();
    mso.device = Some(b);
    mso.depth = 16;
    let mut ms = McastSubscriber::join(GROUP, 22, &mso)?;
    std::thread::sleep(Duration::from_millis(300)); // the join takes effect
    for _ in 0..100 {
        mp.publish(&msg[..24])?;
    }
    mp.flush(Duration::from_secs(10))?; // one heartbeat
    std::thread::sleep(Duration::from_millis(300));
    let (mut seen, mut gaps, mut missed) = (0u64, 0u64, 0u64);
    let mut drain = |ms: &mut McastSubscriber| -> Result<(), Box<dyn std::error::Error>> {
        while let Some(r) = ms.try_recv()? {
            match r {
                Recv::Message(_) => seen += 1,
                Recv::Gap(g) => {
                    gaps += 1;
                    missed += g.missed();
                }
            }
        }
        Ok(())
    };
    drain(&mut ms)?;
    mp.heartbeat()?; // reveals the loss
    std::thread::sleep(Duration::from_millis(300));
    drain(&mut ms)?;
    let st = ms.stats();
    let report = serde_json::json!({
        "rc_published": published, "rc_full": full, "rc_read": read, "rc_position": sub.position(),
        "mc_published": 100, "mc_seen": seen, "mc_gaps": gaps, "mc_missed": missed,
        "mc_heartbeats_seen": st.heartbeats, "mc_malformed": st.malformed, "mc_late": st.late,
        "mc_other": st.other_streams, "mc_unconfirmed": st.unconfirmed,
    });
    println!("{report}");
    std::io::stdout().flush()?;
    let mut sink = String::new();
    let _ = std::io::stdin().read_to_string(&mut sink);
    Ok(())
}

fn find<'a>(streams: &'a [Value], role: &str, transport: &str) -> Result<&'a Value, Failed> {
    streams
        .iter()
        .find(|s| s["role"] == role && s["transport"] == transport)
        .ok_or_else(|| format!("no {transport} {role} in {streams:#?}").into())
}

fn eq(what: &str, got: &Value, want: impl Into<Value>) -> Result<(), Failed> {
    let want = want.into();
    if *got != want {
        return Err(format!("{what}: stat says {got}, the helper says {want}").into());
    }
    Ok(())
}

fn rdma_streams() -> Result<(), Failed> {
    let mut child =
        Command::new(std::env::current_exe()?).env(ROLE, "1").stdin(Stdio::piped()).stdout(Stdio::piped()).spawn()?;
    let pid = child.id();
    let mut lines = BufReader::new(child.stdout.take().ok_or("no stdout")?).lines();
    let did: Value = match lines.next() {
        Some(Ok(l)) => serde_json::from_str(&l)?,
        _ => {
            let _ = child.wait();
            return Err("the helper printed no report (its stderr says why)".into());
        }
    };
    eprintln!("helper: {did}");
    let out = Command::new(env!("CARGO_BIN_EXE_tickbus")).args(["stat", "--json"]).output()?;
    let snap: Value = serde_json::from_slice(&out.stdout)?;
    let mine: Vec<Value> =
        snap["streams"].as_array().ok_or("no streams")?.iter().filter(|s| s["pid"] == pid).cloned().collect();
    eprintln!("stat: {}", serde_json::to_string_pretty(&mine)?);
    if mine.len() != 4 || mine.iter().any(|s| s["live"] != true) {
        return Err(format!("expected four live stream ends: {mine:#?}").into());
    }

    let rp = find(&mine, "publisher", "rdma-rc")?;
    eq("rdma-rc publisher messages", &rp["counters"]["messages"], did["rc_published"].clone())?;
    eq("rdma-rc publisher position", &rp["counters"]["position"], did["rc_published"].clone())?;
    eq("rdma-rc back-pressure", &rp["counters"]["full"], did["rc_full"].clone())?;
    eq("rdma-rc peers", &rp["counters"]["peers"], 1)?;
    eq("rdma-rc publisher errors", &rp["counters"]["errors"], 0)?;
    eq("an 8-slot reliable ring takes 8", &did["rc_published"], 8)?;
    let rs = find(&mine, "subscriber", "rdma-rc")?;
    eq("rdma-rc subscriber messages", &rs["counters"]["messages"], did["rc_read"].clone())?;
    eq("rdma-rc subscriber position", &rs["counters"]["position"], did["rc_position"].clone())?;
    eq("rdma-rc lag", &rs["lag"], 8 - did["rc_read"].as_u64().unwrap_or(0))?;
    eq("rdma-rc stream id", &rs["stream_id"], 21)?;

    let mp = find(&mine, "publisher", "ud-mcast")?;
    eq("ud-mcast publisher messages", &mp["counters"]["messages"], 100)?;
    eq("ud-mcast publisher position", &mp["counters"]["position"], 100)?;
    eq("ud-mcast heartbeats sent (flush + one)", &mp["counters"]["heartbeats"], 2)?;
    let ms = find(&mine, "subscriber", "ud-mcast")?;
    eq("ud-mcast messages", &ms["counters"]["messages"], did["mc_seen"].clone())?;
    eq("ud-mcast gaps", &ms["counters"]["gaps"], did["mc_gaps"].clone())?;
    eq("ud-mcast missed", &ms["counters"]["missed"], did["mc_missed"].clone())?;
    eq("ud-mcast lost (no recovery)", &ms["counters"]["lost"], did["mc_missed"].clone())?;
    eq("ud-mcast heartbeats seen", &ms["counters"]["heartbeats"], did["mc_heartbeats_seen"].clone())?;
    eq("ud-mcast position", &ms["counters"]["position"], 100)?;
    eq("ud-mcast lag", &ms["lag"], 0)?;
    let n = |k: &str| did[k].as_u64().unwrap_or(0);
    let datagrams =
        n("mc_seen") + n("mc_heartbeats_seen") + n("mc_malformed") + n("mc_late") + n("mc_other") + n("mc_unconfirmed");
    eq("ud-mcast datagrams (every one classified)", &ms["counters"]["datagrams"], datagrams)?;
    if n("mc_gaps") == 0 || n("mc_seen") + n("mc_missed") != 100 {
        return Err(format!("16 receive slots for 100 unpolled messages: one gap expected, {did}").into());
    }
    drop(child.stdin.take());
    if !child.wait()?.success() {
        return Err("the helper failed on exit".into());
    }
    let file = tickbus::counters::counters_dir().join(format!("{pid}.counters"));
    if file.exists() {
        return Err(format!("{} outlived its process's clean exit", file.display()).into());
    }
    Ok(())
}
