//! RFC 3339 timestamps: the audit log writes them, compat ordering reads them. Two
//! conversions are all the core needs, so it needs no date library (a property test
//! checks both against the `time` crate).

use std::time::{SystemTime, UNIX_EPOCH};

/// Now, in UTC, as `YYYY-MM-DDTHH:MM:SS.nnnnnnnnnZ`.
pub(crate) fn now() -> String {
    // A clock before 1970 is a broken clock; it reads as the epoch rather than failing
    // an append.
    let since = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .unwrap_or_default();
    format(i128::from(since.as_secs()), since.subsec_nanos())
}

/// `seconds` since the epoch plus `nanos`, in UTC.
pub(crate) fn format(seconds: i128, nanos: u32) -> String {
    let days = seconds.div_euclid(86_400);
    let in_day = seconds.rem_euclid(86_400);
    let (year, month, day) = civil_from_days(days);
    format!(
        "{year:04}-{month:02}-{day:02}T{:02}:{:02}:{:02}.{nanos:09}Z",
        in_day / 3600,
        in_day / 60 % 60,
        in_day % 60
    )
}

/// Milliseconds since the epoch of an RFC 3339 timestamp (`2026-01-01T10:00:00.5+01:00`),
/// or `None` when the text is not one.
pub(crate) fn unix_millis(text: &str) -> Option<i128> {
    let b = text.as_bytes();
    let digits = |from: usize, len: usize| -> Option<i128> {
        let part = b.get(from..from + len)?;
        part.iter().try_fold(0i128, |n, &d| {
            d.is_ascii_digit().then(|| n * 10 + i128::from(d - b'0'))
        })
    };
    let sep = |at: usize, allowed: &[u8]| b.get(at).is_some_and(|c| allowed.contains(c));
    if !(sep(4, b"-") && sep(7, b"-") && sep(10, b"Tt") && sep(13, b":") && sep(16, b":")) {
        return None;
    }
    let (year, month, day) = (digits(0, 4)?, digits(5, 2)?, digits(8, 2)?);
    let (hour, minute, second) = (digits(11, 2)?, digits(14, 2)?, digits(17, 2)?);
    if !(1..=12).contains(&month)
        || day < 1
        || day > days_in_month(year, month)
        || hour > 23
        || minute > 59
        || second > 59
    {
        return None;
    }
    let mut at = 19;
    let mut nanos = 0i128;
    if sep(at, b".") {
        let start = at + 1;
        let len = b[start..].iter().take_while(|c| c.is_ascii_digit()).count();
        if len == 0 {
            return None;
        }
        for (i, &d) in b[start..start + len].iter().take(9).enumerate() {
            nanos += i128::from(d - b'0') * 10i128.pow(8 - i as u32);
        }
        at = start + len;
    }
    let offset = match b.get(at..)? {
        [b'Z' | b'z'] => 0,
        [sign @ (b'+' | b'-'), _, _, b':', _, _] => {
            let (h, m) = (digits(at + 1, 2)?, digits(at + 4, 2)?);
            if h > 23 || m > 59 {
                return None;
            }
            let minutes = h * 60 + m;
            if *sign == b'-' { -minutes } else { minutes }
        }
        _ => return None,
    };
    let seconds = days_from_civil(year, month, day) * 86_400 + hour * 3600 + minute * 60 + second
        - offset * 60;
    // Truncated toward zero, as the ordering has always rounded instants before 1970.
    Some((seconds * 1_000_000_000 + nanos) / 1_000_000)
}

fn is_leap(year: i128) -> bool {
    year % 4 == 0 && (year % 100 != 0 || year % 400 == 0)
}

fn days_in_month(year: i128, month: i128) -> i128 {
    match month {
        2 if is_leap(year) => 29,
        2 => 28,
        4 | 6 | 9 | 11 => 30,
        _ => 31,
    }
}

/// Days since 1970-01-01 of a proleptic Gregorian date (H. Hinnant's algorithm).
fn days_from_civil(year: i128, month: i128, day: i128) -> i128 {
    let year = if month <= 2 { year - 1 } else { year };
    let era = year.div_euclid(400);
    let year_of_era = year - era * 400;
    let day_of_year = (153 * ((month + 9) % 12) + 2) / 5 + day - 1;
    let day_of_era = year_of_era * 365 + year_of_era / 4 - year_of_era / 100 + day_of_year;
    era * 146_097 + day_of_era - 719_468
}

/// The date of a day since 1970-01-01 (the inverse of `days_from_civil`).
fn civil_from_days(days: i128) -> (i128, i128, i128) {
    let days = days + 719_468;
    let era = days.div_euclid(146_097);
    let day_of_era = days - era * 146_097;
    let year_of_era =
        (day_of_era - day_of_era / 1460 + day_of_era / 36_524 - day_of_era / 146_096) / 365;
    let day_of_year = day_of_era - (365 * year_of_era + year_of_era / 4 - year_of_era / 100);
    let mp = (5 * day_of_year + 2) / 153;
    let day = day_of_year - (153 * mp + 2) / 5 + 1;
    let month = if mp < 10 { mp + 3 } else { mp - 9 };
    let year = year_of_era + era * 400 + i128::from(month <= 2);
    (year, month, day)
}

#[cfg(test)]
mod tests {
    use proptest::prelude::*;
    use time::OffsetDateTime;
    use time::format_description::well_known::Rfc3339;

    use super::*;

    fn reference_millis(text: &str) -> Option<i128> {
        OffsetDateTime::parse(text, &Rfc3339)
            .ok()
            .map(|t| t.unix_timestamp_nanos() / 1_000_000)
    }

    #[test]
    fn known_values() {
        assert_eq!(unix_millis("1970-01-01T00:00:00Z"), Some(0));
        assert_eq!(
            unix_millis("2026-01-01T10:00:00.000Z"),
            unix_millis("2026-01-01T11:00:00+01:00")
        );
        assert_eq!(
            unix_millis("2024-02-29T00:00:00Z").map(|m| m > 0),
            Some(true)
        );
        for bad in [
            "",
            "2023-02-29T00:00:00Z",
            "2026-13-01T00:00:00Z",
            "2026-01-01 00:00:00Z",
            "2026-01-01T24:00:00Z",
            "2026-01-01T00:00:00",
            "2026-01-01T00:00:00.Z",
            "2026-01-01T00:00:00+0100",
            "2026-01-01T00:00:00Zjunk",
            "٢٠٢٦-01-01T00:00:00Z",
        ] {
            assert_eq!(unix_millis(bad), None, "{bad}");
        }
        assert_eq!(format(0, 5), "1970-01-01T00:00:00.000000005Z");
        assert!(unix_millis(&now()).is_some());
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(2048))]

        /// Both conversions agree with the `time` crate on every instant from year 1 to
        /// 9999, at every offset and precision.
        #[test]
        fn agrees_with_the_time_crate(
            seconds in -62_135_596_800i128..253_402_300_799,
            nanos in 0u32..1_000_000_000,
            digits in 0usize..10,
            offset in -(23 * 60 + 59)..=(23 * 60 + 59i32),
        ) {
            let text = format(seconds, nanos);
            let reference = OffsetDateTime::from_unix_timestamp_nanos(
                seconds * 1_000_000_000 + i128::from(nanos),
            )
            .unwrap()
            .format(&Rfc3339)
            .unwrap();
            prop_assert_eq!(unix_millis(&text), reference_millis(&reference));
            // Another precision and offset, written by hand.
            let base = &text[..19];
            let fraction = if digits == 0 {
                String::new()
            } else {
                format!(".{}", &format!("{nanos:09}")[..digits])
            };
            let sign = if offset < 0 { '-' } else { '+' };
            let zone = format!("{sign}{:02}:{:02}", offset.abs() / 60, offset.abs() % 60);
            let shifted = format!("{base}{fraction}{zone}");
            prop_assert_eq!(unix_millis(&shifted), reference_millis(&shifted), "{}", shifted);
        }

        #[test]
        fn refuses_what_time_refuses(text in "[0-9T:Z+.\\-]{0,30}") {
            if reference_millis(&text).is_none() {
                // We may be stricter, never looser.
                prop_assert_eq!(unix_millis(&text), None);
            }
        }
    }
}
