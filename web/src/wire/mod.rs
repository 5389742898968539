//! What crosses between the page and the worker, used by both sides: the messages
//! ([`protocol`]), the generic packing of core's result types into typed arrays ([`pack`]), the
//! Allocator State History's shipped columns and their lookups ([`history`]), and one clock.

pub mod clock;
pub mod history;
pub mod pack;
pub mod protocol;
