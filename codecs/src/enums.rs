//! Small enumerations stored as `u8` on the wire. Fields stay raw `u8` (any byte is a valid
//! struct); typed accessors return `None` for values this build does not know.

/// Order side.
#[repr(u8)]
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Side {
    /// A buy.
    Buy = 1,
    /// A sell.
    Sell = 2,
}

impl Side {
    /// The side a wire byte encodes (None for a value this build does not know).
    pub fn from_wire(v: u8) -> Option<Side> {
        match v {
            1 => Some(Side::Buy),
            2 => Some(Side::Sell),
            _ => None,
        }
    }
}

/// Time in force of a new order.
#[repr(u8)]
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum TimeInForce {
    /// Good for the trading day.
    Day = 0,
    /// Fill what can be filled at once, cancel the rest.
    ImmediateOrCancel = 1,
    /// Fill all at once or cancel all.
    FillOrKill = 2,
    /// Rests until cancelled.
    GoodTillCancel = 3,
}

impl TimeInForce {
    /// The time in force a wire byte encodes (None for a value this build does not know).
    pub fn from_wire(v: u8) -> Option<TimeInForce> {
        match v {
            0 => Some(TimeInForce::Day),
            1 => Some(TimeInForce::ImmediateOrCancel),
            2 => Some(TimeInForce::FillOrKill),
            3 => Some(TimeInForce::GoodTillCancel),
            _ => None,
        }
    }
}

/// Order type.
#[repr(u8)]
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum OrdType {
    /// At the limit price or better.
    Limit = 1,
    /// At the best price available.
    Market = 2,
}

impl OrdType {
    /// The order type a wire byte encodes (None for a value this build does not know).
    pub fn from_wire(v: u8) -> Option<OrdType> {
        match v {
            1 => Some(OrdType::Limit),
            2 => Some(OrdType::Market),
            _ => None,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn wire_values_round_trip_and_unknowns_are_none() {
        for s in [Side::Buy, Side::Sell] {
            assert_eq!(Side::from_wire(s as u8), Some(s));
        }
        for t in
            [TimeInForce::Day, TimeInForce::ImmediateOrCancel, TimeInForce::FillOrKill, TimeInForce::GoodTillCancel]
        {
            assert_eq!(TimeInForce::from_wire(t as u8), Some(t));
        }
        for o in [OrdType::Limit, OrdType::Market] {
            assert_eq!(OrdType::from_wire(o as u8), Some(o));
        }
        assert_eq!(Side::from_wire(0), None);
        assert_eq!(TimeInForce::from_wire(4), None);
        assert_eq!(OrdType::from_wire(0), None);
    }
}
