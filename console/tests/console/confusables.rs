//! A reviewer can tell `exаmple` (a Cyrillic `а`) from `example`: the call's page flags
//! each key and string of its arguments holding characters that mix scripts or look like
//! others, and names the characters.

use crate::common;

use common::{PAYLOAD, hold_args, loopback, start};
use serde_json::json;

async fn call_page(args: &serde_json::Value) -> String {
    let dir = tempfile::tempdir().unwrap();
    let store = common::store(&dir).await;
    let held = hold_args(&store, PAYLOAD, args).await;
    let console = start(loopback(&store, "alice")).await;
    console
        .client()
        .get(format!("{}calls/{}", console.url, held.id))
        .send()
        .await
        .unwrap()
        .text()
        .await
        .unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_call_page_names_the_confusable_characters_of_its_arguments() {
    let page = call_page(&json!({
        "to": "ann@ex\u{430}mple.com",
        "t\u{43E}": "eve@evil.example",
        "body": "Hi Ann, see you at the caf\u{E9}.",
    }))
    .await;
    let notes = page
        .split("id=\"confusables\"")
        .nth(1)
        .expect("the page flags the arguments")
        .split("</div>")
        .next()
        .unwrap_or_default();
    assert!(
        notes.contains(
            "<code>value at /to</code>: U+0430 CYRILLIC SMALL LETTER A (Cyrillic among Latin, looks like &quot;a&quot;)"
        ),
        "{notes}"
    );
    assert!(
        notes.contains(
            "<code>key &quot;t\u{43E}&quot; at /t\u{43E}</code>: U+043E CYRILLIC SMALL LETTER O (Cyrillic among Latin, looks like &quot;o&quot;)"
        ),
        "{notes}"
    );
    assert_eq!(
        notes.matches("<p class=\"confusable\">").count(),
        2,
        "the plain key, the real `to` key and the accented body are not flagged: {notes}"
    );
    // Flagged where they are shown too, the note as the flag's title.
    let args = page
        .split("<pre class=\"args\">")
        .nth(1)
        .and_then(|rest| rest.split("</pre>").next())
        .expect("the arguments");
    assert_eq!(
        args.matches("<mark class=\"confusable\"").count(),
        2,
        "{args}"
    );
    assert!(
        args.contains("title=\"U+0430 CYRILLIC SMALL LETTER A (Cyrillic among Latin, looks like &quot;a&quot;)\">⚠</mark> &quot;ann@ex\u{430}mple.com&quot;"),
        "{args}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn plain_arguments_are_not_flagged() {
    let page = call_page(&json!({"to": "ann@example.com", "body": "Grüße aus Zürich"})).await;
    assert!(page.contains("<pre class=\"args\">"), "{page}");
    assert!(!page.contains("id=\"confusables\""), "{page}");
    assert!(!page.contains("class=\"confusable\""), "{page}");
}
