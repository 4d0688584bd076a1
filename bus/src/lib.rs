//! tickbus
