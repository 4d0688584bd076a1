//! The 23 NASDAQ TotalView-ITCH 5.0 message types as zero-copy big-endian views.
//!
//! Every view is `#[repr(C)]`, alignment 1 (zerocopy's big-endian integers are unaligned), and
//! starts with the 11-byte [`ItchHeader`]; sizes are asserted at compile time against the spec.
//! Prices are Price(4) (1/10_000 dollar) unless noted; `stock` fields are space-padded ASCII.
use zerocopy::big_endian::{U16, U32, U64};
use zerocopy::{FromBytes, Immutable, IntoBytes, KnownLayout, Unaligned};

/// type(1) stock_locate(2) tracking_number(2) timestamp(6, ns since midnight).
#[repr(C)]
#[derive(Debug, Clone, Copy, PartialEq, Eq, FromBytes, IntoBytes, KnownLayout, Immutable, Unaligned)]
pub struct ItchHeader {
    /// The message's type code (`S`, `A`, ...).
    pub msg_type: u8,
    /// The stock's index in the day's directory (0 for messages of no stock).
    pub stock_locate: U16,
    /// NASDAQ's internal tracking number.
    pub tracking_number: U16,
    /// Nanoseconds since midnight, 48-bit big-endian ([`ItchHeader::timestamp_ns`] reads it).
    pub timestamp: [u8; 6],
}

impl ItchHeader {
    /// A header for a message of type `code`; `timestamp_ns` is truncated to 48 bits (a day
    /// fits: 86,400 s is under 2^47 ns).
    pub fn new(code: u8, stock_locate: u16, tracking_number: u16, timestamp_ns: u64) -> ItchHeader {
        let be = timestamp_ns.to_be_bytes();
        ItchHeader {
            msg_type: code,
            stock_locate: U16::new(stock_locate),
            tracking_number: U16::new(tracking_number),
            timestamp: [be[2], be[3], be[4], be[5], be[6], be[7]],
        }
    }

    /// Nanoseconds since midnight (the 48-bit big-endian timestamp).
    pub fn timestamp_ns(&self) -> u64 {
        self.timestamp.iter().fold(0u64, |acc, b| (acc << 8) | u64::from(*b))
    }
}

/// Defines one message view and asserts its size.
macro_rules! itch {
    ($(#[$doc:meta])* $name:ident, $code:literal, $len:literal { $($(#[$fdoc:meta])* $field:ident : $ty:ty),* $(,)? }) => {
        $(#[$doc])*
        #[repr(C)]
        #[derive(Debug, Clone, Copy, PartialEq, Eq, FromBytes, IntoBytes, KnownLayout, Immutable, Unaligned)]
        pub struct $name {
            /// Type, stock locate, tracking number and timestamp.
            pub header: ItchHeader,
            $($(#[$fdoc])*
            #[doc = concat!("The ITCH 5.0 spec's `", stringify!($field), "` field, as on the wire (`", stringify!($ty), "`).")]
            pub $field: $ty,)*
        }
        impl $name {
            /// The message's type code (its first byte).
            pub const CODE: u8 = $code;
            /// The message's size in bytes, header included (a non-zero length prefix says the
            /// same).
            pub const LEN: usize = $len;
        }
        const _: () = assert!(core::mem::size_of::<$name>() == $len);
    };
}

itch!(/// `S`: start/end of messages, system hours, market hours.
    SystemEvent, b'S', 12 { event_code: u8 });
itch!(/// `R`: one per security at the start of the day.
    StockDirectory, b'R', 39 {
    stock: [u8; 8], market_category: u8, financial_status: u8, round_lot_size: U32, round_lots_only: u8,
    issue_classification: u8, issue_subtype: [u8; 2], authenticity: u8, short_sale_threshold: u8, ipo_flag: u8,
    luld_reference_price_tier: u8, etp_flag: u8, etp_leverage_factor: U32, inverse_indicator: u8,
});
itch!(/// `H`: trading state of a security (halted, paused, quotation only, trading).
    StockTradingAction, b'H', 25 { stock: [u8; 8], trading_state: u8, reserved: u8, reason: [u8; 4] });
itch!(/// `Y`: Reg SHO short sale price test restriction.
    RegShoRestriction, b'Y', 20 { stock: [u8; 8], reg_sho_action: u8 });
itch!(/// `L`: a market participant's status in a security.
    MarketParticipantPosition, b'L', 26 {
    mpid: [u8; 4], stock: [u8; 8], primary_market_maker: u8, market_maker_mode: u8, market_participant_state: u8,
});
itch!(/// `V`: market-wide circuit breaker decline levels (Price(8)).
    MwcbDeclineLevel, b'V', 35 { level1: U64, level2: U64, level3: U64 });
itch!(/// `W`: a market-wide circuit breaker level was breached.
    MwcbStatus, b'W', 12 { breached_level: u8 });
itch!(/// `K`: anticipated IPO quotation release time.
    IpoQuotingPeriodUpdate, b'K', 28 {
    stock: [u8; 8], ipo_quotation_release_time: U32, ipo_quotation_release_qualifier: u8, ipo_price: U32,
});
itch!(/// `J`: limit up-limit down auction collar.
    LuldAuctionCollar, b'J', 35 {
    stock: [u8; 8], auction_collar_reference_price: U32, upper_auction_collar_price: U32,
    lower_auction_collar_price: U32, auction_collar_extension: U32,
});
itch!(/// `h`: operational halt of a security on one market.
    OperationalHalt, b'h', 21 { stock: [u8; 8], market_code: u8, operational_halt_action: u8 });
itch!(/// `A`: a new order was accepted and added to the book.
    AddOrder, b'A', 36 { order_reference_number: U64, side: u8, shares: U32, stock: [u8; 8], price: U32 });
itch!(/// `F`: a new order with market participant attribution.
    AddOrderMpid, b'F', 40 {
    order_reference_number: U64, side: u8, shares: U32, stock: [u8; 8], price: U32, attribution: [u8; 4],
});
itch!(/// `E`: a resting order executed in part or in full, at its own price.
    OrderExecuted, b'E', 31 { order_reference_number: U64, executed_shares: U32, match_number: U64 });
itch!(/// `C`: a resting order executed at a price other than its own.
    OrderExecutedWithPrice, b'C', 36 {
    order_reference_number: U64, executed_shares: U32, match_number: U64, printable: u8, execution_price: U32,
});
itch!(/// `X`: part of a resting order was cancelled.
    OrderCancel, b'X', 23 { order_reference_number: U64, cancelled_shares: U32 });
itch!(/// `D`: a resting order was removed.
    OrderDelete, b'D', 19 { order_reference_number: U64 });
itch!(/// `U`: a resting order was replaced (new reference, size and price; priority lost).
    OrderReplace, b'U', 35 {
    original_order_reference_number: U64, new_order_reference_number: U64, shares: U32, price: U32,
});
itch!(/// `P`: a match involving a non-displayed order.
    Trade, b'P', 44 {
    order_reference_number: U64, side: u8, shares: U32, stock: [u8; 8], price: U32, match_number: U64,
});
itch!(/// `Q`: the cross (opening, closing, halt, IPO) of a security.
    CrossTrade, b'Q', 40 { shares: U64, stock: [u8; 8], cross_price: U32, match_number: U64, cross_type: u8 });
itch!(/// `B`: an execution was broken.
    BrokenTrade, b'B', 19 { match_number: U64 });
itch!(/// `I`: net order imbalance indicator before a cross.
    Noii, b'I', 50 {
    paired_shares: U64, imbalance_shares: U64, imbalance_direction: u8, stock: [u8; 8], far_price: U32,
    near_price: U32, current_reference_price: U32, cross_type: u8, price_variation_indicator: u8,
});
itch!(/// `N`: retail price improvement indicator.
    Rpii, b'N', 20 { stock: [u8; 8], interest_flag: u8 });
itch!(/// `O`: direct listing with capital raise price discovery.
    DirectListingCapitalRaise, b'O', 48 {
    stock: [u8; 8], open_eligibility_status: u8, minimum_allowable_price: U32, maximum_allowable_price: U32,
    near_execution_price: U32, near_execution_time: U64, lower_price_range_collar: U32,
    upper_price_range_collar: U32,
});

/// Size in bytes of the message with type code `code`, or None for an unknown type.
pub const fn message_len(code: u8) -> Option<usize> {
    Some(match code {
        b'S' => SystemEvent::LEN,
        b'R' => StockDirectory::LEN,
        b'H' => StockTradingAction::LEN,
        b'Y' => RegShoRestriction::LEN,
        b'L' => MarketParticipantPosition::LEN,
        b'V' => MwcbDeclineLevel::LEN,
        b'W' => MwcbStatus::LEN,
        b'K' => IpoQuotingPeriodUpdate::LEN,
        b'J' => LuldAuctionCollar::LEN,
        b'h' => OperationalHalt::LEN,
        b'A' => AddOrder::LEN,
        b'F' => AddOrderMpid::LEN,
        b'E' => OrderExecuted::LEN,
        b'C' => OrderExecutedWithPrice::LEN,
        b'X' => OrderCancel::LEN,
        b'D' => OrderDelete::LEN,
        b'U' => OrderReplace::LEN,
        b'P' => Trade::LEN,
        b'Q' => CrossTrade::LEN,
        b'B' => BrokenTrade::LEN,
        b'I' => Noii::LEN,
        b'N' => Rpii::LEN,
        b'O' => DirectListingCapitalRaise::LEN,
        _ => return None,
    })
}

/// Every type code, in spec order.
pub const CODES: [u8; 23] = *b"SRHYLVWKJhAFECXDUPQBINO";
