//! What the HTTP tests share: the fixtures, and a real HTTP server on the loopback
//! interface that each test starts for itself and scripts with the replies it serves, in
//! order, recording every request it receives.

#![allow(dead_code, reason = "each test binary uses its own part")]

use std::collections::VecDeque;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use axum::Router;
use axum::body::{Body, Bytes};
use axum::extract::{Request, State};
use axum::http::{HeaderMap, StatusCode};
use axum::response::{IntoResponse, Response};
use futures_util::StreamExt;
use serde_json::Value;
use tooltrust_providers::{HttpOptions, RetryPolicy};

pub fn fixture(name: &str) -> String {
    let path = format!("{}/tests/data/providers/{name}", env!("CARGO_MANIFEST_DIR"));
    std::fs::read_to_string(path).expect("fixture")
}

pub fn fixture_json(name: &str) -> Value {
    serde_json::from_str(&fixture(name)).expect("fixture JSON")
}

/// Options for tests: five seconds per attempt, two retries with millisecond backoff.
pub fn fast_http() -> HttpOptions {
    HttpOptions::default()
        .timeout(Duration::from_secs(5))
        .retry(
            RetryPolicy::default()
                .max_retries(2)
                .backoff(Duration::from_millis(1), Duration::from_millis(5)),
        )
}

/// How a scripted reply's body is sent.
#[derive(Debug, Clone)]
enum Payload {
    /// In one piece.
    Whole(String),
    /// In pieces, a millisecond apart, so that the client reads them as separate chunks.
    Chunks(Vec<String>),
    /// In pieces, then the connection is cut before the body ends.
    Cut(Vec<String>),
    /// `head`, then `piece` again and again until the client hangs up, the bytes sent
    /// counted in `sent`.
    Endless {
        head: String,
        piece: Bytes,
        sent: Arc<AtomicUsize>,
    },
    /// `head`, then nothing more: the body never ends.
    Stalled(String),
}

/// One scripted reply.
#[derive(Debug, Clone)]
pub struct Reply {
    status: u16,
    headers: Vec<(&'static str, String)>,
    payload: Payload,
    delay: Duration,
}

impl Reply {
    /// `body` as `application/json` with `status`.
    pub fn json(status: u16, body: impl Into<String>) -> Self {
        Reply {
            status,
            headers: vec![("content-type", "application/json".into())],
            payload: Payload::Whole(body.into()),
            delay: Duration::ZERO,
        }
    }

    /// `text` as a `text/event-stream`, sent event by event.
    pub fn sse(text: &str) -> Self {
        Reply {
            status: 200,
            headers: vec![("content-type", "text/event-stream".into())],
            payload: Payload::Chunks(split_events(text)),
            delay: Duration::ZERO,
        }
    }

    /// `text` as a `text/event-stream`, then the connection cut.
    pub fn cut_sse(text: &str) -> Self {
        Reply {
            payload: Payload::Cut(split_events(text)),
            ..Reply::sse(text)
        }
    }

    /// A body of `content_type` that never ends: `head`, then `piece` repeated; the
    /// counter says how many bytes the server has sent so far.
    pub fn endless(
        content_type: &str,
        head: impl Into<String>,
        piece: impl Into<String>,
    ) -> (Self, Arc<AtomicUsize>) {
        let sent = Arc::new(AtomicUsize::new(0));
        let reply = Reply {
            status: 200,
            headers: vec![("content-type", content_type.to_owned())],
            payload: Payload::Endless {
                head: head.into(),
                piece: Bytes::from(piece.into()),
                sent: Arc::clone(&sent),
            },
            delay: Duration::ZERO,
        };
        (reply, sent)
    }

    /// A body of `content_type` that sends `head` and then stalls.
    pub fn stalled(content_type: &str, head: impl Into<String>) -> Self {
        Reply {
            status: 200,
            headers: vec![("content-type", content_type.to_owned())],
            payload: Payload::Stalled(head.into()),
            delay: Duration::ZERO,
        }
    }

    /// Adds a header.
    pub fn header(mut self, name: &'static str, value: impl Into<String>) -> Self {
        self.headers.push((name, value.into()));
        self
    }

    /// Waits `delay` before answering.
    pub fn delay(mut self, delay: Duration) -> Self {
        self.delay = delay;
        self
    }
}

/// Splits an event stream into chunks that do not line up with its events: every event
/// is split in two, so that the client has to join lines across reads.
fn split_events(text: &str) -> Vec<String> {
    let mut chunks = Vec::new();
    for event in text.split_inclusive("\n\n") {
        let mut middle = event.len() / 2;
        while !event.is_char_boundary(middle) {
            middle += 1;
        }
        chunks.push(event[..middle].to_owned());
        chunks.push(event[middle..].to_owned());
    }
    chunks.retain(|chunk| !chunk.is_empty());
    chunks
}

/// A request the server received.
#[derive(Debug, Clone)]
pub struct Received {
    /// When it arrived.
    pub at: Instant,
    /// The path and query.
    pub uri: String,
    /// Its headers.
    pub headers: HeaderMap,
    /// Its body, as JSON (`null` if it was not JSON).
    pub body: Value,
}

impl Received {
    /// The header's value, if it was sent.
    pub fn header(&self, name: &str) -> Option<&str> {
        self.headers.get(name).and_then(|value| value.to_str().ok())
    }
}

#[derive(Default)]
struct Script {
    replies: Mutex<VecDeque<Reply>>,
    received: Mutex<Vec<Received>>,
}

/// A loopback HTTP server serving a script.
pub struct Server {
    /// `http://127.0.0.1:PORT`.
    pub base: String,
    script: Arc<Script>,
}

impl Server {
    /// Starts a server on a free loopback port that answers its requests with `replies`
    /// in order (and 418 once they run out).
    pub async fn start(replies: Vec<Reply>) -> Server {
        let script = Arc::new(Script {
            replies: Mutex::new(replies.into()),
            received: Mutex::default(),
        });
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
            .await
            .expect("bind loopback");
        let base = format!("http://{}", listener.local_addr().expect("address"));
        let router = Router::new()
            .fallback(answer)
            .with_state(Arc::clone(&script));
        tokio::spawn(async move { axum::serve(listener, router).await });
        Server { base, script }
    }

    /// The requests received so far.
    pub fn received(&self) -> Vec<Received> {
        self.script.received.lock().expect("lock").clone()
    }
}

async fn answer(State(script): State<Arc<Script>>, request: Request) -> Response {
    let (parts, body) = request.into_parts();
    let bytes = axum::body::to_bytes(body, usize::MAX)
        .await
        .unwrap_or_default();
    script.received.lock().expect("lock").push(Received {
        at: Instant::now(),
        uri: parts.uri.to_string(),
        headers: parts.headers,
        body: serde_json::from_slice(&bytes).unwrap_or(Value::Null),
    });
    let reply = script.replies.lock().expect("lock").pop_front();
    let Some(reply) = reply else {
        return (StatusCode::IM_A_TEAPOT, "no reply scripted").into_response();
    };
    tokio::time::sleep(reply.delay).await;
    let body = match reply.payload {
        Payload::Whole(text) => Body::from(text),
        Payload::Chunks(chunks) => Body::from_stream(paced(chunks, false)),
        Payload::Cut(chunks) => Body::from_stream(paced(chunks, true)),
        Payload::Endless { head, piece, sent } => Body::from_stream(endless(head, piece, sent)),
        Payload::Stalled(head) => Body::from_stream(
            futures_util::stream::iter([Ok::<_, std::io::Error>(Bytes::from(head))])
                .chain(futures_util::stream::pending()),
        ),
    };
    let mut response = Response::new(body);
    *response.status_mut() = StatusCode::from_u16(reply.status).expect("status");
    for (name, value) in reply.headers {
        response
            .headers_mut()
            .append(name, value.parse().expect("header value"));
    }
    response
}

/// The chunks a millisecond apart, then (if `cut`) an error that makes the server drop
/// the connection mid-body.
fn paced(
    chunks: Vec<String>,
    cut: bool,
) -> impl futures_util::Stream<Item = Result<Bytes, std::io::Error>> {
    futures_util::stream::unfold((chunks.into_iter(), cut), |(mut chunks, cut)| async move {
        match chunks.next() {
            Some(chunk) => {
                tokio::time::sleep(Duration::from_millis(1)).await;
                Some((Ok(Bytes::from(chunk)), (chunks, cut)))
            }
            None if cut => Some((
                Err(std::io::Error::other("connection cut")),
                (chunks, false),
            )),
            None => None,
        }
    })
}

/// `head`, then `piece` for as long as the client reads, counting the bytes in `sent`.
fn endless(
    head: String,
    piece: Bytes,
    sent: Arc<AtomicUsize>,
) -> impl futures_util::Stream<Item = Result<Bytes, std::io::Error>> {
    let first = Bytes::from(head);
    futures_util::stream::unfold(Some(first), move |next| {
        let piece = piece.clone();
        let sent = Arc::clone(&sent);
        async move {
            let bytes = next.unwrap_or(piece);
            sent.fetch_add(bytes.len(), Ordering::Relaxed);
            Some((Ok(bytes), None))
        }
    })
}
