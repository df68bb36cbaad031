//! The audit log under faults that need child processes: SIGKILL mid-append, and a
//! directory the process may not write (checked as an unprivileged user). Apart from the
//! other audit tests, because a child briefly holds the parent's open files (and the
//! log's lock) between fork and exec.

#[path = "../audit/common.rs"]
mod common;
mod crash;
mod outcome;
mod read_only;
