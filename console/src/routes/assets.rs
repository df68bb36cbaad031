//! The console's own stylesheet and script, embedded in the binary (the only ones its
//! Content-Security-Policy allows).

use axum::http::header;
use axum::response::{IntoResponse, Response};

pub(super) async fn css() -> Response {
    asset(
        "text/css; charset=utf-8",
        include_str!("../../assets/console.css"),
    )
}

pub(super) async fn js() -> Response {
    asset(
        "text/javascript; charset=utf-8",
        include_str!("../../assets/console.js"),
    )
}

fn asset(content_type: &'static str, body: &'static str) -> Response {
    ([(header::CONTENT_TYPE, content_type)], body).into_response()
}
