//! The tamper-evident audit log: appends, disk faults, tampering, and the encrypted
//! quarantine beside it. (A crash and a read-only directory, whose tests start child
//! processes, have their own binary: a child holds the parent's open files, and so the log's lock, between fork
//! and exec, which would disturb the tests here that reopen a log.)

mod common;
mod deferred;
mod disk;
mod log;
mod quarantine;
mod signed;
mod tamper;
