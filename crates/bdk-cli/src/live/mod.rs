//! Turns driven from the terminal (`bdk run`, `bdk chat`): an in-process engine on a project's
//! state directory ([`local`]) or a running server ([`remote`]), behind one [`backend`] trait, the live rendering of a session's events ([`render`]), and the
//! loop that follows one turn to its end while answering approvals ([`drive`]).
//! Nothing here parses flags; the commands own that.

pub mod backend;
pub mod drive;
pub mod local;
pub mod remote;
pub mod render;
