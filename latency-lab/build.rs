//! Compiles the lab's C++ pair (`cpp/abi_pair.cpp`: ping-pong ends written in C++ against
//! tickbus.hpp, calling the C ABI) with the system C++ compiler.
fn main() {
    println!("cargo:rerun-if-changed=cpp/abi_pair.cpp");
    println!("cargo:rerun-if-changed=../ffi/include/tickbus.h");
    println!("cargo:rerun-if-changed=../ffi/include/tickbus.hpp");
    cc::Build::new()
        .cpp(true)
        .std("c++17")
        .opt_level(2)
        .include("../ffi/include")
        .file("cpp/abi_pair.cpp")
        .warnings_into_errors(true)
        .compile("tickbus_lab_cpp");
}
