//! The control channel against hostile peers: anyone who can reach the port may send anything,
//! send it slowly, never read, or sit in the middle of the connection.
use std::io::{BufRead, BufReader, Read, Write};
use std::net::{TcpListener, TcpStream};
use std::time::{Duration, Instant};

use super::*;
use crate::wire::control::{parse_config, parse_hello_sub};
use crate::wire::transcript::Role;

/// A connected (server, client) pair of sockets on loopback.
fn pair() -> (TcpStream, TcpStream) {
    let l = TcpListener::bind("127.0.0.1:0").unwrap();
    let c = TcpStream::connect(l.local_addr().unwrap()).unwrap();
    (l.accept().unwrap().0, c)
}

fn within<T: Send + 'static>(limit: Duration, f: impl FnOnce() -> T + Send + 'static) -> T {
    tickbus_testkit::within(limit, "the peer held us", f)
}

#[test]
fn a_line_without_an_end_is_refused_at_the_length_limit_not_buffered_whole() {
    let (server, mut client) = pair();
    let junk = std::thread::spawn(move || {
        let chunk = vec![b'A'; 64 * 1024];
        let t0 = Instant::now();
        while t0.elapsed() < Duration::from_secs(4) && client.write_all(&chunk).is_ok() {}
    });
    let err = within(Duration::from_secs(3), move || {
        let mut ctl = Control::new(server, Duration::from_secs(10), Role::Publisher).unwrap();
        ctl.recv().unwrap_err().to_string()
    });
    assert!(err.contains("longer than"), "{err}");
    let _ = junk.join();
}

#[test]
fn a_peer_that_trickles_one_byte_at_a_time_cannot_hold_the_handshake_past_its_deadline() {
    let (server, mut client) = pair();
    std::thread::spawn(move || {
        for _ in 0..40 {
            if client.write_all(b"H").is_err() {
                break;
            }
            std::thread::sleep(Duration::from_millis(100));
        }
    });
    let t0 = Instant::now();
    let err = within(Duration::from_secs(3), move || {
        let mut ctl = Control::new(server, Duration::from_secs(1), Role::Publisher).unwrap();
        ctl.recv().unwrap_err().to_string()
    });
    assert!(err.contains("deadline") || err.contains("timed out"), "{err}");
    assert!(t0.elapsed() < Duration::from_millis(1800), "took {:?}", t0.elapsed());
}

#[test]
fn a_peer_that_never_reads_cannot_block_our_writes_past_the_deadline() {
    let (server, client) = pair();
    let err = within(Duration::from_secs(4), move || {
        let mut ctl = Control::new(server, Duration::from_secs(1), Role::Publisher).unwrap();
        let line = "x".repeat(1000);
        loop {
            if let Err(e) = ctl.send(&line) {
                return e.to_string();
            }
        }
    });
    assert!(err.contains("deadline") || err.contains("timed out"), "{err}");
    drop(client);
}

#[test]
fn a_malformed_hello_is_named_but_not_echoed_back_whole() {
    let junk = "GET /".to_owned() + &"A".repeat(10_000);
    let err = parse_hello_sub(&junk).unwrap_err().to_string();
    assert!(err.contains("expected a tickbus-rdma hello"), "{err}");
    assert!(err.len() < 200, "the reply quotes {} bytes of the peer's junk", err.len());
}

#[test]
fn endpoint_lines_with_non_ascii_or_out_of_range_fields_are_errors_not_panics() {
    let gid = format!("a{}b", "€".repeat(10)); // 32 bytes: a hex pair would split a character
    for line in [
        format!("1 2 {gid} 3 4 5"),
        "4294967296 1 00000000000000000000ffffa9fe4d01 0 0 0".to_owned(), // qpn > u32
        "1 1 00000000000000000000ffffa9fe4d01 0 4294967296 0".to_owned(), // rkey > u32
        "1 1 00000000000000000000ffffa9fe4d01 18446744073709551615 1 16".to_owned(), // addr+len wraps
    ] {
        let r = std::panic::catch_unwind(|| line.parse::<crate::sys::verbs::Endpoint>());
        assert!(matches!(r, Ok(Err(_))), "{line:?} must be refused without a panic: {r:?}");
    }
}

#[test]
fn config_lines_refuse_fields_that_do_not_fit_instead_of_truncating_them() {
    let ok = "CONFIG 2 128 256 7 2 2.5 1 0";
    assert!(parse_config(ok).is_ok());
    for bad in [
        "CONFIG 2 128 256 4294967303 2 2.5 1 0", // stream 2^32 + 7 would truncate to 7
        "CONFIG 2 128 256 7 2 2.5 2 0",          // consumer line 2 of 2
        "CONFIG 2 128 256 7 2 2.5 4294967296 0", // consumer index beyond u32
        "CONFIG 2 128 256 7 2 2.5 1 7",          // write mode neither 0 nor 1
    ] {
        assert!(parse_config(bad).is_err(), "{bad} must be refused");
    }
}

/// A relay in the middle passes the hello through untouched (it cannot forge the proofs) and
/// swaps a later line; the receiver must notice.
#[test]
fn a_relay_that_swaps_a_line_after_the_hello_is_detected() {
    let relay = TcpListener::bind("127.0.0.1:0").unwrap();
    let server = TcpListener::bind("127.0.0.1:0").unwrap();
    let (relay_addr, server_addr) = (relay.local_addr().unwrap(), server.local_addr().unwrap());
    std::thread::spawn(move || {
        let (down, _) = relay.accept().unwrap();
        let up = TcpStream::connect(server_addr).unwrap();
        let (mut down_w, mut up_w) = (down.try_clone().unwrap(), up.try_clone().unwrap());
        let mut down_r = down;
        std::thread::spawn(move || {
            let mut b = [0u8; 4096];
            while let Ok(n @ 1..) = down_r.read(&mut b) {
                if up_w.write_all(&b[..n]).is_err() {
                    break;
                }
            }
        });
        for line in BufReader::new(up).lines() {
            let Ok(line) = line else { break };
            let line = line.replacen("EP 1 2 3", "EP 6 6 6", 1);
            if writeln!(down_w, "{line}").is_err() {
                break;
            }
        }
    });
    let publisher = std::thread::spawn(move || {
        let (s, _) = server.accept().unwrap();
        let mut ctl = Control::new(s, Duration::from_secs(5), Role::Publisher).unwrap();
        authenticate_subscriber(&mut ctl, b"token", 7).unwrap();
        ctl.send("EP 1 2 3").unwrap();
        let _ = ctl.recv();
    });
    let mut ctl =
        Control::new(TcpStream::connect(relay_addr).unwrap(), Duration::from_secs(5), Role::Subscriber).unwrap();
    authenticate_to_publisher(&mut ctl, b"token", 7).unwrap();
    let got = ctl.recv();
    assert!(got.is_err(), "the swapped line was accepted: {got:?}");
    drop(ctl);
    let _ = publisher.join();
}
