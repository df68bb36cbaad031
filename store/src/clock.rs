//! Timestamps: RFC 3339 in UTC with exactly six fractional digits, so that text order is
//! time order (the review queue lists newest first by comparing them).

use time::OffsetDateTime;

/// Now, as `YYYY-MM-DDTHH:MM:SS.ffffffZ`.
pub(crate) fn now() -> String {
    format(OffsetDateTime::now_utc())
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
}
