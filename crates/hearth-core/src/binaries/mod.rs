//! The programs Hearth finds on the machine and checks before it relies on them: the pinned OpenCode
//! runtime, ripgrep (the runtime's search tools need it), and the doctor that reports on both.

pub mod doctor;
pub mod executable;
pub mod opencode;
pub mod ripgrep;
