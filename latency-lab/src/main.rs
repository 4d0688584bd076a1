//! latency-lab: closed-loop ping-pong RTT of tickbus transports beside the floor, in one run.
//!
//! Owns: running benchmark bodies on pinned cores, and the report. Never: tunes a figure, or
//! prints a number without the floor measured in the same run beside it.
mod floor;
mod harness;
mod perftest;
#[cfg(feature = "rdma")]
mod rdma_pingpong;
mod report;
mod shm_pingpong;

use std::path::PathBuf;
use std::time::Duration;

use clap::Parser;

use harness::{Bench, RunSpec};

/// Measures tickbus round-trip latency beside the floor (bare cache-line ping-pong).
#[derive(Parser, Debug)]
#[command(version, about)]
struct Args {
    /// Payload bytes per message.
    #[arg(long, default_value_t = 64)]
    size: usize,
    /// Measured round trips per benchmark.
    #[arg(long, default_value_t = 1_000_000)]
    iterations: u64,
    /// Unmeasured round trips first.
    #[arg(long, default_value_t = 100_000)]
    warmup: u64,
    /// Core of the initiating thread.
    #[arg(long, default_value_t = 0)]
    core_a: usize,
    /// Core of the responding thread.
    #[arg(long, default_value_t = 1)]
    core_b: usize,
    /// Folder for the report (table, JSON, percentile distributions).
    #[arg(long, default_value = "lab-report")]
    out: PathBuf,
    /// Measure rdma-rc (WRITE and WRITE_WITH_IMM) between these two devices instead of shm,
    /// e.g. `--rdma rxe0,rxe1` (build with `--features rdma`; in the guest: tools/lab-rdma.sh).
    #[arg(long, value_name = "DEV_A,DEV_B")]
    rdma: Option<String>,
    /// perftest.json from the same boot (tools/rig/guest-perftest.sh): adds ib_write_lat's RTT
    /// for the same size beside the RDMA figures, as a ratio.
    #[arg(long)]
    perftest: Option<PathBuf>,
}

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let args = Args::parse();
    let tsc = tickbus::time::Tsc::new();
    let ticks_per_ns = tsc.measure_ticks_per_ns(Duration::from_millis(200));
    let spec = RunSpec {
        size: args.size,
        iterations: args.iterations,
        warmup: args.warmup,
        cores: (args.core_a, args.core_b),
        ticks_per_ns,
    };
    eprintln!(
        "latency-lab: {} round trips of {} B on cores {}/{} (TSC {:.3} ticks/ns)",
        spec.iterations, spec.size, spec.cores.0, spec.cores.1, ticks_per_ns
    );
    let mut benches: Vec<Box<dyn Bench>> = vec![Box::new(floor::Floor)];
    match &args.rdma {
        None => benches.push(Box::new(shm_pingpong::ShmPingPong::default())),
        #[cfg(feature = "rdma")]
        Some(pair) => {
            let d: Vec<String> = pair.split(',').map(str::to_owned).collect();
            if d.len() != 2 {
                return Err(format!("--rdma takes two device names, e.g. rxe0,rxe1 (got {pair:?})").into());
            }
            for write_mode in [tickbus::rdma::WriteMode::Write, tickbus::rdma::WriteMode::WriteWithImm] {
                benches
                    .push(Box::new(rdma_pingpong::RdmaPingPong { devices: (d[0].clone(), d[1].clone()), write_mode }));
            }
        }
        #[cfg(not(feature = "rdma"))]
        Some(_) => {
            return Err(
                "this latency-lab was built without RDMA: cargo build --release -p tickbus-lab --features rdma".into()
            )
        }
    }
    let mut results = Vec::new();
    for b in benches {
        eprintln!("latency-lab: running {} ...", b.name());
        results.push(b.run(&spec)?);
    }
    let rep = report::Report::new(&spec, results);
    println!("{}", rep.table());
    if let Some(path) = &args.perftest {
        println!("{}", perftest::compare(path, spec.size, rep.outcomes())?);
    }
    let written = rep.write(&args.out)?;
    eprintln!("latency-lab: report written to {}", written.display());
    Ok(())
}
