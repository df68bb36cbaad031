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
use std::os::fd::{AsFd, BorrowedFd};
use std::os::unix::fs::MetadataExt;
use std::pin::Pin;
use std::task::{Context, Poll};

use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};
use tokio::net::unix::pipe;

/// Standard input: a non-blocking pipe when it is one, else tokio's. Dropping it makes
/// the pipe blocking again, for whoever else holds it.
pub struct Input(InputKind);

enum InputKind {
    Pipe(Option<pipe::Receiver>),
    Std(tokio::io::Stdin),
}

/// Standard output: a non-blocking pipe when it is one of its own, else tokio's.
/// Dropping it makes the pipe blocking again, for whoever else holds it.
pub struct Output(OutputKind);

enum OutputKind {
    Pipe(Option<pipe::Sender>),
    Std(tokio::io::Stdout),
}

// The non-blocking flag belongs to the pipe's open description, which the process that
// started this one (and any sibling) shares: it is cleared again when done.
impl Drop for Input {
    fn drop(&mut self) {
        if let InputKind::Pipe(pipe) = &mut self.0
            && let Some(pipe) = pipe.take()
        {
            let _ = pipe.into_blocking_fd();
        }
    }
}

impl Drop for Output {
    fn drop(&mut self) {
        if let OutputKind::Pipe(pipe) = &mut self.0
            && let Some(pipe) = pipe.take()
        {
            let _ = pipe.into_blocking_fd();
        }
    }
}

fn gone() -> io::Error {
    io::Error::new(
        io::ErrorKind::BrokenPipe,
        "standard input or output was closed",
    )
}

/// Standard input and output as an MCP transport (`rmcp` takes the pair).
pub fn stdio() -> (Input, Output) {
    let input = io::stdin()
        .as_fd()
        .try_clone_to_owned()
        .ok()
        .and_then(|fd| pipe::Receiver::from_owned_fd(fd).ok())
        .map_or_else(
            || Input(InputKind::Std(tokio::io::stdin())),
            |pipe| Input(InputKind::Pipe(Some(pipe))),
        );
    let output = io::stdout()
        .as_fd()
        .try_clone_to_owned()
        .ok()
        .filter(|fd| !same_file(fd, &io::stderr()))
        .and_then(|fd| pipe::Sender::from_owned_fd(fd).ok())
        .map_or_else(
            || Output(OutputKind::Std(tokio::io::stdout())),
            |pipe| Output(OutputKind::Pipe(Some(pipe))),
        );
    (input, output)
}

/// Whether `fd` and `other` are the same file (standard error sent down the pipe of
/// standard output, `2>&1`): then the pipe stays blocking, so that writing a
/// diagnostic never meets a full non-blocking pipe.
fn same_file(fd: &impl AsFd, other: &impl AsFd) -> bool {
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
        match &mut self.get_mut().0 {
            InputKind::Pipe(Some(pipe)) => Pin::new(pipe).poll_read(cx, buf),
            InputKind::Pipe(None) => Poll::Ready(Err(gone())),
            InputKind::Std(std) => Pin::new(std).poll_read(cx, buf),
        }
    }
}

impl AsyncWrite for Output {
    fn poll_write(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<io::Result<usize>> {
        match &mut self.get_mut().0 {
            OutputKind::Pipe(Some(pipe)) => Pin::new(pipe).poll_write(cx, buf),
            OutputKind::Pipe(None) => Poll::Ready(Err(gone())),
            OutputKind::Std(std) => Pin::new(std).poll_write(cx, buf),
        }
    }

    fn poll_flush(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        match &mut self.get_mut().0 {
            OutputKind::Pipe(Some(pipe)) => Pin::new(pipe).poll_flush(cx),
            OutputKind::Pipe(None) => Poll::Ready(Err(gone())),
            OutputKind::Std(std) => Pin::new(std).poll_flush(cx),
        }
    }

    fn poll_shutdown(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        match &mut self.get_mut().0 {
            OutputKind::Pipe(Some(pipe)) => Pin::new(pipe).poll_shutdown(cx),
            OutputKind::Pipe(None) => Poll::Ready(Err(gone())),
            OutputKind::Std(std) => Pin::new(std).poll_shutdown(cx),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn two_ends_of_one_pipe_are_the_same_file_and_two_pipes_are_not() {
        let (_, writer) = io::pipe().unwrap();
        let (_, other) = io::pipe().unwrap();
        let copy = writer.try_clone().unwrap();
        assert!(same_file(&writer, &copy));
        assert!(!same_file(&writer, &other));
    }

    #[tokio::test]
    async fn a_pipe_is_blocking_again_once_dropped() {
        let (reader, writer) = io::pipe().unwrap();
        let owned: std::os::fd::OwnedFd = writer.into();
        let copy = owned.try_clone().unwrap();
        let file = File::from(copy);
        let sender = pipe::Sender::from_owned_fd(owned).unwrap();
        assert!(is_nonblocking(&file), "the description is shared");
        drop(Output(OutputKind::Pipe(Some(sender))));
        assert!(!is_nonblocking(&file));
        drop(reader);
    }

    fn is_nonblocking(file: &File) -> bool {
        // The flag shows in /proc: O_NONBLOCK is 0o4000 in the octal `flags:` line.
        let fd = file.as_fd();
        let text = std::fs::read_to_string(format!(
            "/proc/self/fdinfo/{}",
            std::os::fd::AsRawFd::as_raw_fd(&fd)
        ))
        .unwrap();
        let flags = text
            .lines()
            .find_map(|line| line.strip_prefix("flags:"))
            .map(|value| u32::from_str_radix(value.trim(), 8).unwrap())
            .unwrap();
        flags & 0o4000 != 0
    }
}
