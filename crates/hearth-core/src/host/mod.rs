//! The machine Hearth runs on: its clock, how its window paints, child processes that never outlive it, process information, which
//! process is behind a loopback connection, the data folder's paths, logging, the
//! one-Hearth-per-data-folder lock and the records of runtime processes swept at start-up.

pub mod child;
pub mod clock;
pub mod display;
pub mod logging;
pub mod output_tail;
pub mod paths;
pub mod peer;
pub mod procinfo;
pub mod records;
pub mod single_instance;
