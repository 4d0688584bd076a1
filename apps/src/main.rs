//! `tickbus`: operator commands for rings on this host, and for exchange data (ITCH files and
//! pcap captures of MoldUDP64).
//!
//! Owns: argument parsing and printing. Never: changes a ring or a file it is only asked to inspect.
mod args;
mod crash;
mod doctor;
mod exchange;
mod feed;
mod feed_snapshots;
mod gateway;
#[cfg(test)]
mod hot_path_tests;
mod itch;
mod journal;
mod link;
mod metrics_http;
mod mold_server;
mod pipeline;
mod record;
mod replay;
mod ring;
mod snapshot;
mod stat;
mod streams;
mod trader;
mod venue_snapshots;

use std::path::PathBuf;
use std::process::ExitCode;

use clap::{Parser, Subcommand};

/// The hot-path proofs count allocations per thread.
#[cfg(test)]
#[global_allocator]
static ALLOC: tickbus_testkit::Counting = tickbus_testkit::Counting;
use tickbus::shm::ShmOptions;

#[derive(Parser)]
#[command(version, about = "tickbus operator commands")]
struct Cli {
    #[command(subcommand)]
    cmd: Cmd,
    /// More diagnostics (repeat for more).
    #[arg(short, long, action = clap::ArgAction::Count, global = true)]
    verbose: u8,
    /// Fewer diagnostics (repeat for none).
    #[arg(short, long, action = clap::ArgAction::Count, global = true)]
    quiet: u8,
}

#[derive(Subcommand)]
enum Cmd {
    /// Shared-memory rings.
    #[command(subcommand)]
    Ring(RingCmd),
    /// NASDAQ ITCH 5.0 files and MoldUDP64 captures.
    #[command(subcommand)]
    Itch(ItchCmd),
    /// Record a stream into a journal (stops cleanly on Ctrl-C / SIGTERM).
    Record(record::RecordArgs),
    /// Replay a journal, an ITCH file or a MoldUDP64 capture onto a stream.
    Replay(replay::ReplayArgs),
    /// Journals.
    #[command(subcommand)]
    Journal(JournalCmd),
    /// A MoldUDP64 feed handler: two lines arbitrated, gaps re-requested, ITCH normalised and
    /// published on a ring.
    Feed(feed::FeedArgs),
    /// Serve a recording as MoldUDP64 on two multicast lines with a re-request server and loss
    /// generators (tests and demos).
    MoldServer(mold_server::MoldServerArgs),
    /// Whole-book snapshots of a market-data stream, made from its journal and published every
    /// period on a stream of their own: a late joiner loads one and replays only what follows.
    Snapshot(snapshot::SnapshotArgs),
    /// A trading app: keeps the L3 book from normalised market data, sends IOC orders on
    /// top-of-book changes, reads the execution reports back (the model for your own).
    Trader(trader::TraderArgs),
    /// An order gateway / exchange simulator: matches IOC orders against the last quote, sends
    /// one execution report per order, and reports each order's tick-to-trade hop by hop.
    Gateway(gateway::GatewayArgs),
    /// The venue in one process: replays an ITCH file as market data, open loop at a fixed
    /// rate, with the gateway on the same core (a composite agent), for the trader to trade
    /// against; reports each order's tick-to-trade hop by hop.
    Exchange(exchange::ExchangeArgs),
    /// Check this host before trusting its figures: invariant TSC, clocksource, hugepages,
    /// memlock, the cores you pin to (isolation, governor, SMT, IRQs) and RDMA ports; each
    /// finding with its fix. Exit code 0 when ready, 1 when not.
    Doctor(doctor::DoctorArgs),
    /// Every stream on this host in one view: per publisher and subscriber its position, lag,
    /// messages, bytes, gaps, back-pressure, RDMA errors and liveness, from the processes'
    /// counters files and the ring headers; --watch for rates, --json, --prometheus, --listen.
    Stat(stat::StatArgs),
}

#[derive(Subcommand)]
enum JournalCmd {
    /// What a journal holds (segments, messages, gaps, sequences, times), every record checked.
    Inspect {
        /// The journal folder (its *.tbj segments and *.idx indexes).
        dir: PathBuf,
        /// Print JSON instead of text.
        #[arg(long)]
        json: bool,
    },
    /// Check a whole journal: every record's CRC and order, every index entry against the
    /// record it names. Exits non-zero if anything is wrong (for scripts).
    Verify {
        /// The journal folder.
        dir: PathBuf,
        /// Print JSON instead of text.
        #[arg(long)]
        json: bool,
    },
    /// Print records, decoded: one line each as text, or JSON lines with every field by name.
    /// --from and --to (inclusive) take a sequence number or an RFC 3339 time
    /// (2026-12-03T10:30:00Z); the start is found through the index.
    Cat {
        /// The journal folder.
        dir: PathBuf,
        /// The first record: a sequence number or a time.
        #[arg(long, value_parser = journal::bound)]
        from: Option<journal::Bound>,
        /// The last record: a sequence number or a time.
        #[arg(long, value_parser = journal::bound)]
        to: Option<journal::Bound>,
        /// JSON lines instead of text.
        #[arg(long)]
        json: bool,
    },
    /// Serve a journal to a late joiner on another host (or this one): its records from a
    /// position on, on a reliable stream, as the recorder goes on writing it; `tickbus trader
    /// --join URI` reads it there.
    Serve(journal::ServeArgs),
    /// Export a journal for research tools: one Parquet file per message type (a column per
    /// field, TSC and UTC receive times) and gaps.parquet, readable by pandas, polars, DuckDB.
    Export {
        /// The journal folder.
        dir: PathBuf,
        /// The folder to write the Parquet files into (created if missing).
        #[arg(long, value_name = "OUT_DIR")]
        parquet: PathBuf,
        /// Print JSON instead of text.
        #[arg(long)]
        json: bool,
    },
}

#[derive(Subcommand)]
enum RingCmd {
    /// Print a ring's layout, publisher state and consumer positions.
    Inspect { name: String },
    /// Every ring on this host, one line each: layout, position, publisher and consumers.
    List {
        /// Print JSON.
        #[arg(long)]
        json: bool,
    },
    /// Delete a ring file (processes that mapped it keep their mapping).
    Rm { name: String },
}

#[derive(Subcommand)]
enum ItchCmd {
    /// Per-type counts, per-stock activity, first and last timestamps and the rate profile of an
    /// ITCH file or a pcap/pcapng capture of MoldUDP64 (the format is detected).
    Inspect {
        file: PathBuf,
        /// Print JSON instead of tables.
        #[arg(long)]
        json: bool,
        /// Stocks to list in the table, busiest first (JSON lists all).
        #[arg(long, default_value_t = 10)]
        top: usize,
        /// Only UDP datagrams to this destination port (captures only).
        #[arg(long)]
        port: Option<u16>,
    },
    /// Write a deterministic synthetic trading day as an ITCH file and/or a pcap capture.
    Generate {
        /// ITCH file to write.
        #[arg(long)]
        itch: Option<PathBuf>,
        /// pcap capture (MoldUDP64 over Ethernet/IPv4/UDP) to write.
        #[arg(long)]
        pcap: Option<PathBuf>,
        #[arg(long, default_value_t = 1)]
        seed: u64,
        #[arg(long, default_value_t = 100, value_parser = clap::value_parser!(u16).range(1..))]
        stocks: u16,
        /// Order-flow messages (system events, directory and crosses come on top).
        #[arg(long, default_value_t = 1_000_000, value_parser = args::within(1, 10_000_000_000))]
        messages: u64,
    },
}

fn main() -> ExitCode {
    let cli = Cli::parse();
    crash::arm_from_env();
    init_logging(cli.verbose, cli.quiet);
    let opts = ShmOptions::default();
    let res = match cli.cmd {
        Cmd::Ring(RingCmd::Inspect { name }) => ring::inspect(&name, &opts),
        Cmd::Ring(RingCmd::Rm { name }) => ring::rm(&name, &opts),
        Cmd::Ring(RingCmd::List { json }) => stat::ring_list(json, &opts),
        Cmd::Itch(ItchCmd::Inspect { file, json, top, port }) => itch::inspect(&file, json, top, port),
        Cmd::Itch(ItchCmd::Generate { itch, pcap, seed, stocks, messages }) => {
            itch::generate(itch.as_deref(), pcap.as_deref(), seed, stocks, messages)
        }
        Cmd::Record(a) => record::run(a),
        Cmd::Replay(a) => replay::run(a),
        Cmd::Journal(JournalCmd::Inspect { dir, json }) => journal::inspect(&dir, json),
        Cmd::Journal(JournalCmd::Export { dir, parquet, json }) => journal::export(&dir, &parquet, json),
        Cmd::Journal(JournalCmd::Verify { dir, json }) => journal::verify(&dir, json),
        Cmd::Journal(JournalCmd::Serve(a)) => journal::serve(a),
        Cmd::Journal(JournalCmd::Cat { dir, from, to, json }) => journal::cat(&dir, from, to, json),
        Cmd::Feed(a) => feed::run(a),
        Cmd::MoldServer(a) => mold_server::run(a),
        Cmd::Snapshot(a) => snapshot::run(a),
        Cmd::Trader(a) => trader::run(a),
        Cmd::Gateway(a) => gateway::run(a),
        Cmd::Exchange(a) => exchange::run(a),
        Cmd::Doctor(a) => doctor::run(a),
        Cmd::Stat(a) => stat::run(a, &opts),
    };
    match res {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("tickbus: {e}");
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
