//! An upstream's standard error, relayed to the proxy's made inert.

use std::io::Write as _;

use tokio::io::AsyncRead;
use tokio::process::ChildStderr;

/// Relays a stdio upstream's standard error to the proxy's, a line at a time, each made
/// inert and named: the upstream writes to whoever runs the proxy or `tooltrust mcp pin`,
/// and escape sequences must not reach that terminal.
pub(super) async fn errors(upstream: String, mut errors: ChildStderr) {
    const LINE: usize = 4096;
    let mut pending: Vec<u8> = Vec::new();
    let mut chunk = [0u8; 1024];
    let show = |line: &[u8]| {
        let text = String::from_utf8_lossy(line);
        // A closed standard error must not end the relay: the upstream would block once
        // its pipe is full.
        let _ = writeln!(
            std::io::stderr().lock(),
            "tooltrust: upstream {upstream:?} says: {}",
            tooltrust::envelope::inert(text.trim_end_matches(['\n', '\r']))
        );
    };
    loop {
        let read = std::future::poll_fn(|cx| {
            let mut buffer = tokio::io::ReadBuf::new(&mut chunk);
            std::pin::Pin::new(&mut errors)
                .poll_read(cx, &mut buffer)
                .map_ok(|()| buffer.filled().len())
        })
        .await;
        let read = match read {
            Ok(0) | Err(_) => break,
            Ok(read) => read,
        };
        pending.extend_from_slice(&chunk[..read]);
        while let Some(end) = pending.iter().position(|&b| b == b'\n') {
            show(&pending[..end]);
            pending.drain(..=end);
        }
        if pending.len() >= LINE {
            show(&pending);
            pending.clear();
        }
    }
    if !pending.is_empty() {
        show(&pending);
    }
}
