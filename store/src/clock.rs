//! Timestamps: RFC 3339 in UTC with exactly six fractional digits, so that text order is
//! time order (the review queue lists newest first by comparing them).

use std::time::Duration;

use sqlx::{Any, Row, Transaction};
use time::OffsetDateTime;

use crate::engine::Engine;
use crate::error::StoreError;

/// Now, as `YYYY-MM-DDTHH:MM:SS.ffffffZ`, by this host's clock.
pub(crate) fn now() -> String {
    format(OffsetDateTime::now_utc())
}

/// Now, in the same format as [`now`], by the clock that judges expiry for everyone
/// sharing the store: on PostgreSQL the server's (`clock_timestamp()`, read in `tx`, so
/// that a fleet of hosts agrees whatever their own clocks say); on SQLite this host's,
/// the one host that opens the file.
///
/// `clock_timestamp()` rather than `now()`: the moment of the statement, not the start of
/// the transaction, which may have waited for a lock.
pub(crate) async fn now_in(
    tx: &mut Transaction<'static, Any>,
    engine: Engine,
) -> Result<String, StoreError> {
    instant_in(tx, engine).await.map(format)
}

/// The moment `ttl` after now by the same clock as [`now_in`], in the same format: the
/// expiry a call held now gets. A `ttl` past the year 9999 ends then.
#[allow(
    dead_code,
    reason = "the review queue's hold switches to it (issue 38); remove this then"
)]
pub(crate) async fn expiry_in(
    tx: &mut Transaction<'static, Any>,
    engine: Engine,
    ttl: Duration,
) -> Result<String, StoreError> {
    instant_in(tx, engine)
        .await
        .map(|now| format(later(now, ttl)))
}

async fn instant_in(
    tx: &mut Transaction<'static, Any>,
    engine: Engine,
) -> Result<OffsetDateTime, StoreError> {
    const OP: &str = "read the database's clock";
    match engine {
        Engine::Sqlite => Ok(OffsetDateTime::now_utc()),
        Engine::Postgres => {
            // Microseconds since the epoch: exact, and formatted by the one formatter.
            let row = sqlx::query(
                "SELECT CAST(EXTRACT(EPOCH FROM clock_timestamp()) * 1000000 AS BIGINT)",
            )
            .fetch_one(&mut **tx)
            .await
            .map_err(|e| engine.error(OP, e))?;
            let micros: i64 = row.try_get(0).map_err(|e| engine.error(OP, e))?;
            OffsetDateTime::from_unix_timestamp_nanos(i128::from(micros) * 1000)
                .map_err(|e| engine.error(OP, sqlx::Error::Decode(Box::new(e))))
        }
    }
}

/// The last moment the format writes, 9999-12-31T23:59:59.999999Z, in nanoseconds since
/// the epoch.
const LAST_NANOS: i128 = 253_402_300_799_999_999_000;

/// `ttl` after `now`, at most the last moment the format writes.
fn later(now: OffsetDateTime, ttl: Duration) -> OffsetDateTime {
    let ttl = i128::try_from(ttl.as_nanos()).unwrap_or(i128::MAX);
    let nanos = now
        .unix_timestamp_nanos()
        .saturating_add(ttl)
        .min(LAST_NANOS);
    OffsetDateTime::from_unix_timestamp_nanos(nanos)
        .unwrap_or_else(|_| unreachable!("at most 9999-12-31, which time represents"))
}

fn format(t: OffsetDateTime) -> String {
    format!(
        "{:04}-{:02}-{:02}T{:02}:{:02}:{:02}.{:06}Z",
        t.year(),
        u8::from(t.month()),
        t.day(),
        t.hour(),
        t.minute(),
        t.second(),
        t.microsecond()
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use time::format_description::well_known::Rfc3339;

    #[test]
    fn timestamps_are_fixed_width_rfc3339() {
        let t = OffsetDateTime::from_unix_timestamp_nanos(1_767_225_600_000_007_000).unwrap();
        let text = format(t);
        assert_eq!(text, "2026-01-01T00:00:00.000007Z");
        assert_eq!(OffsetDateTime::parse(&text, &Rfc3339).unwrap(), t);
        let earlier = format(t - time::Duration::microseconds(8));
        assert!(earlier < text, "{earlier} sorts before {text}");
    }

    /// An expiry is `ttl` after now, in the same format; one past the year 9999 ends
    /// then.
    #[test]
    fn expiries_are_later_by_the_ttl() {
        let t = OffsetDateTime::from_unix_timestamp_nanos(1_767_225_600_000_007_000).unwrap();
        assert_eq!(
            format(later(t, std::time::Duration::from_secs(24 * 3600))),
            "2026-01-02T00:00:00.000007Z"
        );
        for forever in [
            std::time::Duration::from_secs(u64::MAX),
            std::time::Duration::MAX,
        ] {
            assert_eq!(format(later(t, forever)), "9999-12-31T23:59:59.999999Z");
        }
    }

    /// `now_in` on SQLite is this host's clock, in the fixed-width format.
    #[tokio::test]
    async fn the_sqlite_clock_is_the_hosts() {
        sqlx::any::install_default_drivers();
        let pool = sqlx::AnyPool::connect("sqlite::memory:").await.unwrap();
        let mut tx = pool.begin().await.unwrap();
        let before = now();
        let text = now_in(&mut tx, Engine::Sqlite).await.unwrap();
        let after = now();
        assert_fixed_width(&text);
        assert!(
            before <= text && text <= after,
            "{before} <= {text} <= {after}"
        );
        tx.rollback().await.unwrap();
        pool.close().await;
    }

    /// `now_in` on PostgreSQL reads the server's clock inside the transaction, in the
    /// fixed-width format, so that every host of a fleet judges expiry by one clock.
    /// Runs with `TOOLTRUST_TEST_POSTGRES`; without it, does nothing.
    #[tokio::test]
    async fn the_postgres_clock_is_the_servers() {
        let Some(url) = std::env::var("TOOLTRUST_TEST_POSTGRES")
            .ok()
            .filter(|url| !url.is_empty())
        else {
            return;
        };
        sqlx::any::install_default_drivers();
        let pool = sqlx::AnyPool::connect(&url).await.unwrap();
        let mut tx = pool.begin().await.unwrap();
        // A session time zone far from UTC must not show through.
        sqlx::query("SET LOCAL TIME ZONE 'Pacific/Kiritimati'")
            .execute(&mut *tx)
            .await
            .unwrap();
        let first = now_in(&mut tx, Engine::Postgres).await.unwrap();
        let second = now_in(&mut tx, Engine::Postgres).await.unwrap();
        let hour = std::time::Duration::from_secs(3600);
        let expiry = expiry_in(&mut tx, Engine::Postgres, hour).await.unwrap();
        for text in [&first, &second, &expiry] {
            assert_fixed_width(text);
        }
        let ahead = OffsetDateTime::parse(&expiry, &Rfc3339).unwrap()
            - OffsetDateTime::parse(&second, &Rfc3339).unwrap();
        assert!(
            ahead >= time::Duration::HOUR && ahead < time::Duration::HOUR + time::Duration::MINUTE,
            "{expiry} is an hour after {second}"
        );
        assert!(
            first < second,
            "the statement's clock moves within a transaction: {first}, {second}"
        );
        // The server in the tests runs on this machine: its clock agrees with ours.
        let server = OffsetDateTime::parse(&first, &Rfc3339).unwrap();
        let skew = (server - OffsetDateTime::now_utc()).abs();
        assert!(
            skew < time::Duration::minutes(1),
            "{first}: {skew} from this host"
        );
        tx.rollback().await.unwrap();
        pool.close().await;
    }

    fn assert_fixed_width(text: &str) {
        let shape: String = text
            .chars()
            .map(|c| if c.is_ascii_digit() { 'd' } else { c })
            .collect();
        assert_eq!(shape, "dddd-dd-ddTdd:dd:dd.ddddddZ", "{text}");
        let parsed = OffsetDateTime::parse(text, &Rfc3339).unwrap();
        assert_eq!(parsed.offset(), time::UtcOffset::UTC, "{text}");
        assert_eq!(format(parsed), text);
    }
}
