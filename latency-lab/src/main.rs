//! latency-lab: every tickbus transport beside the floor and the peers, in one run, with
//! percentile reports, HdrHistogram files and plots.
//!
//! Owns: choosing what to run, running it on pinned cores, and the report. Never: tunes a
//! figure, or prints a number without the floor and the peers measured in the same run.
mod bench;
mod model;
mod render;

use bench::{pipeline, soak, suite};
use render::compare;

use std::path::PathBuf;
use std::process::ExitCode;

use clap::{Args, Parser, Subcommand};

/// Unit tests that busy-poll both cores take this, so they do not time-share the cores with
/// each other.
#[cfg(test)]
pub static CORES: std::sync::Mutex<()> = std::sync::Mutex::new(());

/// Measures tickbus beside the floor (bare cache-line ping-pong) and the peers, in one run.
/// With no subcommand: the default suite (tick-to-trade demo, ping-pong at 32/64/288/1344 B,
/// open loop at 100k and 1M msg/s, throughput, ITCH decode, journal: recorder, read, replay
/// pacing, a sustained recording), written to --out.
#[derive(Parser, Debug)]
#[command(version, about)]
struct Cli {
    #[command(subcommand)]
    cmd: Option<Cmd>,
    #[command(flatten)]
    suite: SuiteArgs,
    /// More diagnostics (repeat for more).
    #[arg(short, long, action = clap::ArgAction::Count, global = true)]
    verbose: u8,
    /// Fewer diagnostics (repeat for none).
    #[arg(short, long, action = clap::ArgAction::Count, global = true)]
    quiet: u8,
}

#[derive(Args, Debug, Clone)]
pub struct SuiteArgs {
    /// Core of the initiating (sending) thread.
    #[arg(long, default_value_t = 0, global = true)]
    pub core_a: usize,
    /// Core of the responding (receiving) thread.
    #[arg(long, default_value_t = 1, global = true)]
    pub core_b: usize,
    /// Folder for the report.
    #[arg(long, default_value = "lab-report", global = true)]
    pub out: PathBuf,
    /// Measured round trips at 64 B (other sizes: a third; kernel sockets: a tenth).
    #[arg(long, default_value_t = 1_000_000)]
    pub iterations: u64,
    /// Message sizes for ping-pong.
    #[arg(long, value_delimiter = ',', default_values_t = [32usize, 64, 288, 1344])]
    pub sizes: Vec<usize>,
    /// Open-loop rates (messages per second).
    #[arg(long, value_delimiter = ',', default_values_t = [100_000u64, 1_000_000])]
    pub rates: Vec<u64>,
    /// Seconds per open-loop run.
    #[arg(long, default_value_t = 2.0)]
    pub open_loop_seconds: f64,
    /// Messages per throughput run.
    #[arg(long, default_value_t = 10_000_000)]
    pub throughput_messages: u64,
    /// Order-flow messages in the generated ITCH day (decode benchmark and tick-to-trade).
    #[arg(long, default_value_t = 1_000_000)]
    pub itch_messages: u64,
    /// Tick-to-trade replay rate (messages per second).
    #[arg(long, default_value_t = 1_000_000)]
    pub ttt_rate: u64,
    /// Replay this ITCH file in the tick-to-trade demo and the pipeline instead of a generated
    /// day. It is memory-mapped, never read whole: do not truncate it while the lab runs.
    #[arg(long)]
    pub itch: Option<PathBuf>,
    /// Stocks in the TotalView-scale day of the book benchmark.
    #[arg(long, default_value_t = 8_000)]
    pub book_stocks: u16,
    /// Live orders the TotalView-scale day builds up to (its peak).
    #[arg(long, default_value_t = 1_100_000)]
    pub book_peak_orders: u64,
    /// Order-flow messages in the TotalView-scale day (the build-up takes about 1.9 per order).
    #[arg(long, default_value_t = 3_000_000)]
    pub book_messages: u64,
    /// Paired rounds (book and floor back to back, order alternating) of the book benchmark.
    #[arg(long, default_value_t = 6)]
    pub book_rounds: u32,
    /// Messages the recorder and journal-read benchmarks write and read.
    #[arg(long, default_value_t = 2_000_000)]
    pub journal_messages: u64,
    /// Seconds of the sustained recording (a publisher at 1M msg/s recorded with nothing lost).
    #[arg(long, default_value_t = 60.0)]
    pub record_seconds: f64,
    /// Cores for the trading pipeline's processes (default: --core-a,--core-b). Two: the
    /// exchange (feed + gateway) on the first, the trader on the second; three or more: the
    /// exchange, the trader and the gateway each on their own.
    #[arg(long, value_delimiter = ',')]
    pub cores: Vec<usize>,
    /// Seconds of market data per pipeline run (at each of --rates; at most the ITCH day).
    #[arg(long, default_value_t = 2.0)]
    pub pipeline_seconds: f64,
    /// Paired rounds of the pipeline beside its floors, per rate (the verdicts are the rounds'
    /// median ratios).
    #[arg(long, default_value_t = 3)]
    pub pipeline_rounds: usize,
    /// Paired rounds of the venue with its inline snapshot maker and without (at the lowest of
    /// --rates, snapshots every 0.2 s; 0: none). Part of the pipeline part. Eleven (from five):
    /// one round's ratio of the two p99s ran from 0.79x to 3.04x in one run, and five rounds'
    /// median flipped the verdict between runs; a round is about 5 s.
    #[arg(long, default_value_t = 11)]
    pub snapshot_rounds: usize,
    /// Paired rounds of the venue with a late joiner catching up from the journal and without
    /// (at the lowest of --rates, a recorder in both; 0: none). Part of the pipeline part. Five
    /// (from three): one round's ratio of the two p99s ran from 0.75x to 3.19x in one run; a
    /// round is about 10 s.
    #[arg(long, default_value_t = 5)]
    pub join_rounds: usize,
    /// The `tickbus` binary the pipeline runs (default: beside latency-lab).
    #[arg(long)]
    pub tickbus: Option<PathBuf>,
    /// Fan-out's rate (messages per second, open loop).
    #[arg(long, default_value_t = 100_000)]
    pub fanout_rate: u64,
    /// Seconds per fan-out run (one per subscriber count).
    #[arg(long, default_value_t = 2.0)]
    pub fanout_seconds: f64,
    /// Seconds per wire-to-trade run (each of --rates, each way of taking datagrams).
    #[arg(long, default_value_t = 1.0)]
    pub wire_seconds: f64,
    /// Paired rounds of the wire ingest ways (each way in turn, order alternating). Many short
    /// rounds, not a few long ones: sending into a veth runs the receiving side's kernel path on
    /// the sender's core, so a host gap of a few ms puts a 100k/s sender behind, and a round it
    /// falls behind in is left out. With three rounds of 1 s, no udp round kept its schedule in
    /// four runs; rounds of 0.2 s between the host's gaps do.
    #[arg(long, default_value_t = 9)]
    pub wire_rounds: usize,
    /// Seconds per wire ingest round (each of --rates, each way).
    #[arg(long, default_value_t = 0.2)]
    pub wire_round_seconds: f64,
    /// Skip parts of the suite (a misspelt part is an error, not ignored).
    #[arg(long, value_delimiter = ',', value_enum)]
    pub skip: Vec<Part>,
    /// Include figures from the Soft-RoCE guest run (tools/lab-rdma.sh writes them here; `none`:
    /// include none).
    #[arg(long, default_value = "lab-report/rdma/report.json")]
    pub rdma_report: PathBuf,
}

/// The parts of the default suite, for `--skip`.
#[derive(clap::ValueEnum, Debug, Clone, Copy, PartialEq, Eq)]
pub enum Part {
    /// The in-process tick-to-trade demo.
    Ttt,
    /// The trading pipeline across processes.
    Pipeline,
    /// Ping-pong RTT per size.
    Pingpong,
    /// Open loop at each rate.
    Openloop,
    /// Throughput, sender flat out.
    Throughput,
    /// ITCH decode and the order book.
    Itch,
    /// The order book at TotalView scale (~8,000 stocks, over a million live orders) beside
    /// its floor.
    Book,
    /// The journal: recorder, read, replay pacing, sustained recording.
    Journal,
    /// Fan-out: one shm ring read by 1, 2 and 4 consumer processes.
    Fanout,
    /// From the wire: MoldUDP64 over a veth, AF_XDP and UDP ingest beside their floors (root;
    /// built with --features xdp).
    Wire,
}

#[derive(Subcommand, Debug)]
enum Cmd {
    /// Flags percentiles in NEW that are worse than in OLD by more than --threshold percent,
    /// lists what OLD measured and NEW did not, and warns when the two come from different
    /// environments. Exit code 0: nothing worse; 1: regressed; 2: could not compare (a file
    /// unreadable, or rows missing from NEW).
    Compare {
        old: PathBuf,
        new: PathBuf,
        #[arg(long, default_value_t = 10.0)]
        threshold: f64,
    },
    /// rdma-rc (WRITE and WRITE_WITH_IMM) and ud-mcast ping-pong between two devices (build with
    /// `--features rdma`; in the Soft-RoCE guest: tools/lab-rdma.sh).
    Rdma {
        /// Two device names, e.g. rxe0,rxe1.
        #[arg(long, value_name = "DEV_A,DEV_B")]
        devices: String,
        /// Message sizes (one section each).
        #[arg(long, value_delimiter = ',', default_values_t = [64usize])]
        sizes: Vec<usize>,
        #[arg(long, default_value_t = 2_000)]
        iterations: u64,
        /// Also compare against a perftest.json written by tools/rig/guest-perftest.sh (perftest
        /// run once, before; the rounds measure perftest beside tickbus without it).
        #[arg(long)]
        perftest: Option<PathBuf>,
        /// Rounds of the trading pipeline over RDMA (`tickbus exchange` on the first device,
        /// `tickbus trader` on the second), each after perftest's one-way UD and RC figures
        /// (0: none).
        #[arg(long, default_value_t = 3)]
        pipeline_rounds: usize,
        /// The pipeline's rate over RDMA (ITCH messages per second; Soft-RoCE under TCG sends a
        /// few thousand datagrams per second at most).
        #[arg(long, default_value_t = 500)]
        pipeline_rate: u64,
        /// ITCH messages per pipeline round.
        #[arg(long, default_value_t = 1000)]
        pipeline_messages: u64,
        /// Rounds of perftest then tickbus, for each size's RTT and each message rate: the
        /// report gives the median ratio and its spread (TCG's speed drifts within a boot).
        #[arg(long, default_value_t = 3)]
        rounds: usize,
        /// Sizes of the message-rate runs beside ib_write_bw and ib_send_bw UD (none: skip).
        #[arg(long, value_delimiter = ',', default_values_t = [64usize, 1344])]
        rate_sizes: Vec<usize>,
        /// Messages per message-rate run (tickbus's and perftest's alike).
        #[arg(long, default_value_t = 20_000)]
        rate_messages: u64,
        /// Fan-out to 1, 2 and 4 subscribers (rdma-rc and ud-mcast): the publisher's paced rate.
        #[arg(long, default_value_t = 1_000)]
        fanout_rate: u64,
        /// Messages per fan-out run (0: no fan-out).
        #[arg(long, default_value_t = 2_000)]
        fanout_messages: u64,
    },
    /// ud-mcast fan-out across the rig's two guests (tools/rig/rig run --guests 2): the publisher
    /// in guest 0, 1, 2 and 4 subscribers in guest 1, so their receive work is another kernel's.
    /// Guest 0 writes fanout-hosts.json into --out, which the main job adds to its report (build
    /// with `--features rdma`; tools/lab-rdma.sh runs it)
    RdmaFanoutHosts {
        /// The publisher's paced rate (messages per second).
        #[arg(long, default_value_t = 1_000)]
        rate: u64,
        /// Messages per subscriber count and round.
        #[arg(long, default_value_t = 2_000)]
        messages: u64,
        /// Rounds over the subscriber counts (ascending, then descending), merged per count.
        #[arg(long, default_value_t = 3)]
        rounds: usize,
    },
    /// A reliable shm stream at a fixed rate for minutes, read by consumer processes: every
    /// message checked (lost, reordered, torn), memory sampled, one-way percentiles per minute
    /// (from each message's intended send time). Writes soak.json and soak.txt into --out/soak;
    /// exits 1 on any loss, reorder or memory growth.
    Soak {
        #[arg(long, default_value_t = 10)]
        minutes: u64,
        #[arg(long, default_value_t = 1_000_000)]
        rate: u64,
        /// Consumer processes (reliable: the publisher waits for all of them).
        #[arg(long, default_value_t = 2)]
        consumers: usize,
    },
    /// The reading side of a bare ring hop across processes (started by the pipeline's floor).
    #[command(hide = true, name = "__hop-floor")]
    HopFloor {
        #[arg(long)]
        ring: String,
        #[arg(long)]
        count: u64,
        #[arg(long)]
        core: usize,
        /// A reliable consumer line (else a lossy observer).
        #[arg(long)]
        consumer: bool,
    },
    /// The relay of tick-to-trade's chained floor (started by the pipeline's floor): reads
    /// market data, answers one message in `every` with an order carrying its stamp.
    #[command(hide = true, name = "__hop-relay")]
    HopRelay {
        #[arg(long)]
        md: String,
        #[arg(long)]
        orders: String,
        #[arg(long)]
        count: u64,
        #[arg(long)]
        every: u64,
        #[arg(long)]
        core: usize,
    },
    /// A soak consumer (started by the soak itself).
    #[command(hide = true, name = "__soak-consumer")]
    SoakConsumer {
        #[arg(long)]
        ring: String,
        #[arg(long)]
        index: usize,
        #[arg(long)]
        total: u64,
        #[arg(long)]
        core: usize,
    },
    /// The child side of a two-process ping-pong (started by the lab itself).
    #[command(hide = true, name = "__echo")]
    Echo {
        #[arg(long)]
        peer: String,
        #[arg(long)]
        ping: String,
        #[arg(long)]
        pong: String,
        #[arg(long)]
        size: usize,
        #[arg(long)]
        total: u64,
        #[arg(long)]
        core: usize,
        #[arg(long)]
        ticks_per_ns: f64,
    },
}

fn main() -> ExitCode {
    let cli = Cli::parse();
    init_logging(cli.verbose, cli.quiet);
    let res: Result<(), Box<dyn std::error::Error>> = match cli.cmd {
        None => bench::default_suite::run(&cli.suite),
        Some(Cmd::Compare { old, new, threshold }) => match compare::compare(&old, &new, threshold) {
            Ok(c) => {
                print!("{}", c.text);
                if !c.environment.is_empty() {
                    eprintln!("latency-lab compare: {} environment differences, listed above", c.environment.len());
                }
                return ExitCode::from(c.exit_code());
            }
            Err(e) => {
                eprintln!("latency-lab compare: {e}");
                return ExitCode::from(compare::exit::INCOMPLETE);
            }
        },
        Some(Cmd::Rdma {
            devices,
            sizes,
            iterations,
            perftest,
            pipeline_rounds,
            pipeline_rate,
            pipeline_messages,
            rounds,
            rate_sizes,
            rate_messages,
            fanout_rate,
            fanout_messages,
        }) => {
            let p = suite::RdmaPipeline { rounds: pipeline_rounds, rate: pipeline_rate, messages: pipeline_messages };
            let v = suite::RdmaVersus { rounds, rate_sizes, rate_messages, fanout_rate, fanout_messages };
            suite::rdma(&cli.suite, &devices, &sizes, iterations, perftest.as_deref(), &p, &v)
        }
        Some(Cmd::RdmaFanoutHosts { rate, messages, rounds }) => {
            suite::rdma_fanout_hosts(&cli.suite.out, rate, messages, rounds)
        }
        Some(Cmd::Soak { minutes, rate, consumers }) => {
            let s = &cli.suite;
            soak::run(minutes, rate, consumers, (s.core_a, s.core_b), &s.out.join("soak"))
        }
        Some(Cmd::HopFloor { ring, count, core, consumer }) => pipeline::hop_floor_reader(&ring, count, consumer, core),
        Some(Cmd::HopRelay { md, orders, count, every, core }) => {
            bench::chain_floor::relay(&md, &orders, count, every, core)
        }
        Some(Cmd::SoakConsumer { ring, index, total, core }) => soak::consumer(&ring, index, total, core),
        Some(Cmd::Echo { peer, ping, pong, size, total, core, ticks_per_ns }) => {
            suite::echo(&peer, &ping, &pong, size, total, core, ticks_per_ns)
        }
    };
    match res {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("latency-lab: {e}");
            ExitCode::FAILURE
        }
    }
}

/// Installs the logger the library's diagnostics go to: warnings by default, `-v` info,
/// `-vv` debug, `-vvv` trace, `-q` errors only, `-qq` nothing; `RUST_LOG` overrides.
fn init_logging(verbose: u8, quiet: u8) {
    let level = match i16::from(verbose) - i16::from(quiet) {
        i16::MIN..=-2 => log::LevelFilter::Off,
        -1 => log::LevelFilter::Error,
        0 => log::LevelFilter::Warn,
        1 => log::LevelFilter::Info,
        2 => log::LevelFilter::Debug,
        _ => log::LevelFilter::Trace,
    };
    env_logger::Builder::new().filter_level(level).parse_default_env().format_timestamp(None).init();
}
