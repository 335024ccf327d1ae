//! The input protocol that resumes parked work: answers to input requests ([`settle`]), plain
//! messages that revoke what is pending ([`revoke`]), cancelling a turn ([`cancel`]),
//! running the claimed calls of a resumed step ([`resume`]), messages that steer a turn
//! while it goes on ([`steer`]), and deliveries to the hooks workflow bodies wait on
//! ([`hook`]); and whether a person may answer a request, asked without answering ([`may`]).

pub(crate) mod cancel;
pub(crate) mod hook;
pub(crate) mod may;
pub(crate) mod resume;
pub(crate) mod revoke;
pub(crate) mod settle;
pub(crate) mod steer;
