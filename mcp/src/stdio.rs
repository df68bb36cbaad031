//! The process's standard input and output as an MCP transport that the event loop
//! drives directly when they are pipes, as they are under every MCP host.
//!
//! tokio's `stdin()`/`stdout()` hand every read and write to a blocking thread, one
//! thread hop per message each way; a proxy pays that twice per call more than the
//! server behind it. A pipe can be read and written without blocking instead: standard
//! input and output are then read and written through the reactor. Anything else (a
//! terminal, a file), and a standard output that standard error shares, stays with
//! tokio's blocking reader and writer.

use std::fs::File;
use std::io;
use std::os::fd::{AsFd, BorrowedFd, OwnedFd};
use std::os::unix::fs::MetadataExt;
use std::pin::Pin;
use std::task::{Context, Poll};

use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};
use tokio::net::unix::pipe;

/// Standard input: a non-blocking pipe when it is one, else tokio's.
pub enum Input {
    /// A pipe, read through the reactor.
    Pipe(pipe::Receiver),
    /// Anything else, through tokio's blocking reader.
    Std(tokio::io::Stdin),
}

/// Standard output: a non-blocking pipe when it is one, else tokio's.
pub enum Output {
    /// A pipe, written through the reactor.
    Pipe(pipe::Sender),
    /// Anything else, through tokio's blocking writer.
    Std(tokio::io::Stdout),
}

/// Standard input and output as an MCP transport (`rmcp` takes the pair).
pub fn stdio() -> (Input, Output) {
    let input = io::stdin()
        .as_fd()
        .try_clone_to_owned()
        .ok()
        .and_then(|fd| pipe::Receiver::from_owned_fd(fd).ok())
        .map_or_else(|| Input::Std(tokio::io::stdin()), Input::Pipe);
    let output = io::stdout()
        .as_fd()
        .try_clone_to_owned()
        .ok()
        .filter(|fd| !same_file(fd, &io::stderr()))
        .and_then(|fd| pipe::Sender::from_owned_fd(fd).ok())
        .map_or_else(|| Output::Std(tokio::io::stdout()), Output::Pipe);
    (input, output)
}

/// Whether `fd` and `other` are the same file (standard error sent down the pipe of
/// standard output, `2>&1`): then the pipe stays blocking, so that writing a
/// diagnostic never meets a full non-blocking pipe.
fn same_file(fd: &OwnedFd, other: &impl AsFd) -> bool {
    let stat = |fd: BorrowedFd<'_>| {
        fd.try_clone_to_owned()
            .and_then(|owned| File::from(owned).metadata())
            .map(|meta| (meta.dev(), meta.ino()))
    };
    match (stat(fd.as_fd()), stat(other.as_fd())) {
        (Ok(a), Ok(b)) => a == b,
        // Unknown: assume shared, and keep the blocking writer.
        _ => true,
    }
}

impl AsyncRead for Input {
    fn poll_read(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        match self.get_mut() {
            Input::Pipe(pipe) => Pin::new(pipe).poll_read(cx, buf),
            Input::Std(std) => Pin::new(std).poll_read(cx, buf),
        }
    }
}

impl AsyncWrite for Output {
    fn poll_write(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<io::Result<usize>> {
        match self.get_mut() {
            Output::Pipe(pipe) => Pin::new(pipe).poll_write(cx, buf),
            Output::Std(std) => Pin::new(std).poll_write(cx, buf),
        }
    }

    fn poll_flush(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        match self.get_mut() {
            Output::Pipe(pipe) => Pin::new(pipe).poll_flush(cx),
            Output::Std(std) => Pin::new(std).poll_flush(cx),
        }
    }

    fn poll_shutdown(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        match self.get_mut() {
            Output::Pipe(pipe) => Pin::new(pipe).poll_shutdown(cx),
            Output::Std(std) => Pin::new(std).poll_shutdown(cx),
        }
    }
}
