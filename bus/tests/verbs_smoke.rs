//! Verbs smoke suite on real libibverbs (`verbs_smoke/body.rs`): device, hugepage
//! registration, RC RDMA WRITE and WRITE_WITH_IMM between two processes across devices, UD
//! SEND/RECV, UD multicast with the IP-level join. It drives tickbus's private verbs layer
//! (`tickbus::sys::verbs`), which only a test build opens (`--cfg tickbus_testing`, as
//! tools/test.sh builds): built without it, the suite fails and says how to build it, never
//! passes empty.
mod common;

#[cfg(tickbus_testing)]
#[path = "verbs_smoke/body.rs"]
mod body;

fn main() {
    #[cfg(tickbus_testing)]
    body::main();
    #[cfg(not(tickbus_testing))]
    {
        eprintln!("verbs_smoke drives tickbus's private verbs layer: {}", tickbus_testkit::TESTING_BUILD);
        std::process::exit(1);
    }
}
