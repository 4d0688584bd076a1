//! The trading pipeline over RDMA on one host (the rig's guest, rxe0 and rxe1 on two veths):
//! `tickbus exchange` with ud-mcast and rdma-rc stream URIs on rxe0 (market data by ud-mcast with recovery, the gateway
//! reading orders by rdma-rc and answering on its own rdma-rc stream) and `tickbus trader
//! ` with the same URIs on rxe1. Counts are exact and every order is timed hop by hop. Ignored (with
//! the reason) on a host without two RDMA devices; a failure in the guest, where
//! TICKBUS_REQUIRE_RDMA=1 is set.
use libtest_mimic::{Arguments, Failed, Trial};

mod common;

fn main() {
    let mut args = Arguments::from_args();
    args.test_threads = Some(1);
    let devices = tickbus::rdma::device_names();
    let skip = devices.len() < 2 && std::env::var_os("TICKBUS_REQUIRE_RDMA").is_none();
    if skip {
        eprintln!("trading_rdma: needs two RDMA devices (the Soft-RoCE guest: tools/test.sh): tests ignored");
    }
    let tests = vec![Trial::test("the_pipeline_over_rdma_counts_exactly_and_times_every_hop", one_host)];
    libtest_mimic::run(&args, tests.into_iter().map(|t| t.with_ignored_flag(skip)).collect()).exit();
}

fn one_host() -> Result<(), Failed> {
    let d = tickbus::rdma::device_names();
    let dev = |i: usize, var: &str| std::env::var(var).ok().or_else(|| d.get(i).cloned()).ok_or("no RDMA device");
    let (exchange_dev, trader_dev) = (dev(0, "TICKBUS_RDMA_DEVICE")?, dev(1, "TICKBUS_RDMA_PEER_DEVICE")?);
    let dir = std::env::temp_dir().join(format!("trading-rdma-{}", std::process::id()));
    let day = common::day(&dir, 1500);
    // The streams as channel URIs, the same for both apps (each opens as publisher what it
    // publishes): market data by ud-mcast with recovery, orders and reports by rdma-rc.
    let net = [
        "--md",
        "ud-mcast://239.77.52.1/1?recovery=127.0.0.1:47201",
        "--orders",
        "rdma-rc://127.0.0.1:47202/2",
        "--execs",
        "rdma-rc://127.0.0.1:47203/3",
        "--token",
        "trading-rdma-test",
        "--wait-secs",
        "120",
        "--json",
    ];
    let mut ex_args = vec!["exchange", "--itch", day.to_str().ok_or("path")?, "--rate", "500", "--drain-secs", "60"];
    ex_args.extend(["--device", &exchange_dev]);
    ex_args.extend(net);
    let exchange = common::spawn(&ex_args);
    let mut tr_args = vec!["trader", "--md-quiet-secs", "3", "--drain-secs", "30", "--device", &trader_dev];
    tr_args.extend(net);
    let trader = common::spawn(&tr_args);
    let tr = common::finish(trader, "trader");
    if tr.is_err() {
        common::kill(&exchange); // it waits for a trader that is gone: its output says why
    }
    let (tr, ex) = common::both(tr, common::finish(exchange, "exchange"))?;
    let (ticks, orders, recovered) = common::check_counts(&ex, &tr, true)?;
    eprintln!("rdma pipeline, one host: {ticks} ticks ({recovered} recovered), {orders} orders, each answered once");
    let rows = [&ex["feed_ns"], &tr["tick_hop_ns"]];
    for hop in rows.into_iter().chain(ex["gateway"]["hops_ns"].as_array().ok_or("no hops")?) {
        eprintln!("  {:<62} p50 {:>9} ns  p99 {:>9} ns", hop["hop"].as_str().unwrap_or(""), hop["p50"], hop["p99"]);
    }
    let _ = std::fs::remove_dir_all(dir);
    Ok(())
}
