//! Behaviour on the PipeCD wire types: validation, status transitions, key and id generation.
//! The types themselves are generated in `wisp-proto`; this crate adds what upstream's Go code does with them.

pub mod clock;
pub mod event;
pub mod git;
pub mod status;
pub mod validate;
