//! How values of the types with no datum of their own are stored: `DECIMAL`, `DATE`,
//! `DATETIME` and `BOOLEAN` are all held as [`Datum::Int`](wire::datum::Datum), so the
//! coprocessor compares, orders, groups and finds the MIN/MAX of them as integers, exactly,
//! with no type of its own; the catalog's column type says what the integer means.
//!
//! | type | stored integer |
//! |------|----------------|
//! | `DECIMAL(p, s)` (p ≤ 18) | the value × 10^s (`12.30` in `DECIMAL(5,2)` is 1230) |
//! | `DATE` | days since 1970-01-01 (proleptic Gregorian) |
//! | `DATETIME(fsp)` / `TIMESTAMP(fsp)` | microseconds since 1970-01-01 00:00:00, UTC |
//! | `BOOLEAN` | 0 or 1 |
//!
//! Integer order is value order for each (the scale is fixed per column), so a pushed
//! comparison against a literal converted here is exact. Arithmetic over the stored integer
//! is not the value's arithmetic: planners push only comparisons, MIN/MAX/COUNT and, for
//! `DECIMAL`, SUM (the sum of scaled integers is the scaled sum). Index keys hold the stored
//! integers too, so an index's order is the values' order.
//!
//! Text forms are MySQL's: `-12.30`; `2024-02-29`; `2024-02-29 13:05:00[.ffffff]` (a `T`
//! between date and time is read too).

/// The widest `DECIMAL` stored: 18 digits fit an i64 (10^18 < 2^63).
pub const MAX_DECIMAL_PRECISION: u8 = 18;

/// Days from 0000-03-01 to 1970-01-01, in the civil-from-days algorithm's era arithmetic.
const EPOCH_SHIFT: i64 = 719_468;
const MICROS_PER_DAY: i64 = 86_400_000_000;
/// 0001-01-01 and 9999-12-31 as days since 1970-01-01: the dates MySQL's DATETIME holds
/// (DATE's documented floor is 1000-01-01, but it stores earlier dates too).
const MIN_DAY: i64 = -719_162;
const MAX_DAY: i64 = 2_932_896;

/// 10^n for n ≤ 38.
fn pow10(n: u32) -> i128 {
    10i128.pow(n)
}

/// Parses decimal text (`[+-]digits[.digits][e[+-]digits]`) into the value × 10^`scale`,
/// rounding half away from zero past `scale` digits, as MySQL does when it stores a value;
/// more than `precision - scale` integer digits is out of range.
pub fn parse_decimal(text: &str, precision: u8, scale: u8) -> Result<i64, String> {
    decimal(text, precision, scale).map(|(v, _)| v)
}

/// [`parse_decimal`]'s value, and whether it is exact (no nonzero digit was rounded off).
fn decimal(text: &str, precision: u8, scale: u8) -> Result<(i64, bool), String> {
    let t = text.trim();
    let (negative, body) = match t.as_bytes().first() {
        Some(b'-') => (true, &t[1..]),
        Some(b'+') => (false, &t[1..]),
        _ => (false, t),
    };
    let (mantissa, exponent) = match body.find(['e', 'E']) {
        Some(i) => {
            let e: i32 = body[i + 1..]
                .parse()
                .map_err(|_| format!("not a number: {text:?}"))?;
            (&body[..i], e)
        }
        None => (body, 0),
    };
    let (int_part, frac_part) = mantissa.split_once('.').unwrap_or((mantissa, ""));
    let all_digits = |s: &str| s.bytes().all(|b| b.is_ascii_digit());
    if int_part.is_empty() && frac_part.is_empty()
        || !all_digits(int_part)
        || !all_digits(frac_part)
    {
        return Err(format!("not a number: {text:?}"));
    }
    // The digits, and how many of them are after the point once the exponent moved it.
    let digits: String = format!("{int_part}{frac_part}");
    let digits = digits.trim_start_matches('0');
    let frac_len = frac_part.len() as i64 - i64::from(exponent);
    let out_of_range = || {
        format!(
            "out of range for DECIMAL({precision},{scale}): expected at most {} digits before \
             the point, found {text}",
            precision - scale
        )
    };
    // Digits before the point must fit; check before building a number from them.
    let int_digits = digits.len() as i64 - frac_len;
    if int_digits > i64::from(precision - scale) {
        return Err(out_of_range());
    }
    // Keep `scale` digits after the point (plus one to round on).
    let keep = digits.len() as i64 - (frac_len - i64::from(scale)) + 1;
    let mut v: i128 = 0;
    let mut taken = 0i64;
    for b in digits.bytes() {
        if taken >= keep {
            break;
        }
        v = v * 10 + i128::from(b - b'0');
        taken += 1;
    }
    // Pad when the text had fewer fraction digits than the scale (+1 for the round digit).
    let shift = keep - taken;
    if shift > 0 {
        v *= pow10(shift as u32);
    }
    // Exact when the digit kept past the scale and every digit after it are zeros.
    let exact = v % 10 == 0 && digits.bytes().skip(keep.max(0) as usize).all(|b| b == b'0');
    // Half away from zero: the one digit kept past the scale decides.
    let scaled = (v + 5) / 10;
    if scaled >= pow10(u32::from(precision)) {
        return Err(out_of_range());
    }
    let scaled = i64::try_from(scaled).map_err(|_| out_of_range())?;
    Ok((if negative { -scaled } else { scaled }, exact))
}

/// [`parse_decimal`] when `text` has no nonzero digit past `scale`: the value exactly,
/// never rounded (a condition's literal), else why not.
pub fn parse_decimal_exact(text: &str, precision: u8, scale: u8) -> Result<i64, String> {
    match decimal(text, precision, scale)? {
        (v, true) => Ok(v),
        (_, false) => Err(format!("not exact at scale {scale}: {text}")),
    }
}

/// The text of a stored decimal `v` (the value × 10^`scale`): `-12.30`, `0.05`, `7`.
pub fn format_decimal(v: i128, scale: u8) -> String {
    let sign = if v < 0 { "-" } else { "" };
    let m = v.unsigned_abs();
    if scale == 0 {
        return format!("{sign}{m}");
    }
    let p = 10u128.pow(u32::from(scale));
    format!(
        "{sign}{}.{:0width$}",
        m / p,
        m % p,
        width = usize::from(scale)
    )
}

/// Days since 1970-01-01 of a proleptic Gregorian date (Howard Hinnant's days_from_civil).
pub fn days_from_civil(year: i64, month: u32, day: u32) -> i64 {
    let y = if month <= 2 { year - 1 } else { year };
    let era = y.div_euclid(400);
    let yoe = y - era * 400;
    let m = i64::from(month);
    let doy = (153 * (if m > 2 { m - 3 } else { m + 9 }) + 2) / 5 + i64::from(day) - 1;
    let doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
    era * 146_097 + doe - EPOCH_SHIFT
}

/// The (year, month, day) of `days` since 1970-01-01 (civil_from_days).
pub fn civil_from_days(days: i64) -> (i64, u32, u32) {
    let z = days + EPOCH_SHIFT;
    let era = z.div_euclid(146_097);
    let doe = z - era * 146_097;
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let d = (doy - (153 * mp + 2) / 5 + 1) as u32;
    let m = if mp < 10 { mp + 3 } else { mp - 9 } as u32;
    let y = yoe + era * 400 + i64::from(m <= 2);
    (y, m, d)
}

fn days_in_month(year: i64, month: u32) -> u32 {
    match month {
        4 | 6 | 9 | 11 => 30,
        2 if year % 4 == 0 && (year % 100 != 0 || year % 400 == 0) => 29,
        2 => 28,
        _ => 31,
    }
}

/// `n` ASCII digits of `s` at `at` as a number.
fn digits(s: &[u8], at: usize, n: usize) -> Option<u32> {
    let part = s.get(at..at + n)?;
    part.iter().try_fold(0u32, |v, b| {
        b.is_ascii_digit().then(|| v * 10 + u32::from(b - b'0'))
    })
}

/// `YYYY-MM-DD` at the start of `s`, as days since 1970-01-01.
fn date_prefix(s: &[u8], text: &str) -> Result<i64, String> {
    let bad = || format!("not a date, expected YYYY-MM-DD: {text:?}");
    let (Some(y), Some(m), Some(d)) = (digits(s, 0, 4), digits(s, 5, 2), digits(s, 8, 2)) else {
        return Err(bad());
    };
    if s.get(4) != Some(&b'-') || s.get(7) != Some(&b'-') {
        return Err(bad());
    }
    let y = i64::from(y);
    if y == 0 || !(1..=12).contains(&m) || d == 0 || d > days_in_month(y, m) {
        return Err(format!("not a valid date: {text:?}"));
    }
    Ok(days_from_civil(y, m, d))
}

/// `YYYY-MM-DD` as days since 1970-01-01. A time after the date (`YYYY-MM-DD hh:mm:ss`) is
/// dropped, as MySQL does when it stores a DATE.
pub fn parse_date(text: &str) -> Result<i64, String> {
    let s = text.trim().as_bytes();
    let days = date_prefix(s, text)?;
    if s.len() > 10 {
        parse_datetime(text, 6)?;
    }
    Ok(days)
}

/// `YYYY-MM-DD[( |T)hh:mm:ss[.f{1,6}]]` as microseconds since 1970-01-01 UTC, the fraction
/// rounded to `fsp` digits (0..=6) as MySQL stores a `DATETIME(fsp)`.
pub fn parse_datetime(text: &str, fsp: u8) -> Result<i64, String> {
    let s = text.trim().as_bytes();
    let bad = || format!("not a datetime, expected YYYY-MM-DD hh:mm:ss[.ffffff]: {text:?}");
    let days = date_prefix(s, text)?;
    let mut micros = days * MICROS_PER_DAY;
    if s.len() > 10 {
        if !matches!(s[10], b' ' | b'T') {
            return Err(bad());
        }
        let (Some(h), Some(mi), Some(sec)) = (digits(s, 11, 2), digits(s, 14, 2), digits(s, 17, 2))
        else {
            return Err(bad());
        };
        if s.get(13) != Some(&b':') || s.get(16) != Some(&b':') {
            return Err(bad());
        }
        if h > 23 || mi > 59 || sec > 59 {
            return Err(format!("not a valid time: {text:?}"));
        }
        micros += (i64::from(h) * 3600 + i64::from(mi) * 60 + i64::from(sec)) * 1_000_000;
        match s.get(19) {
            None => {}
            Some(b'.') => {
                let frac = &s[20..];
                if frac.is_empty() || frac.len() > 9 || !frac.iter().all(u8::is_ascii_digit) {
                    return Err(bad());
                }
                // Nanoseconds, then rounded to the column's digits.
                let mut ns: i64 = 0;
                for i in 0..9 {
                    ns = ns * 10 + frac.get(i).map_or(0, |b| i64::from(b - b'0'));
                }
                let unit = 10i64.pow(9 - u32::from(fsp.min(6)));
                let rounded = (ns + unit / 2) / unit * unit;
                micros += rounded / 1000;
            }
            Some(_) => return Err(bad()),
        }
    }
    if !(MIN_DAY * MICROS_PER_DAY..(MAX_DAY + 1) * MICROS_PER_DAY).contains(&micros) {
        return Err(format!("out of range 0001-01-01..9999-12-31: {text:?}"));
    }
    Ok(micros)
}

/// Whether `days` is a date the types hold (0001-01-01..=9999-12-31).
pub fn date_in_range(days: i64) -> bool {
    (MIN_DAY..=MAX_DAY).contains(&days)
}

/// `YYYY-MM-DD` of `days` since 1970-01-01.
pub fn format_date(days: i64) -> String {
    let (y, m, d) = civil_from_days(days);
    format!("{y:04}-{m:02}-{d:02}")
}

/// `YYYY-MM-DD hh:mm:ss`, with `.ffffff` only when the fraction is not zero.
pub fn format_datetime(micros: i64) -> String {
    let days = micros.div_euclid(MICROS_PER_DAY);
    let in_day = micros.rem_euclid(MICROS_PER_DAY);
    let secs = in_day / 1_000_000;
    let frac = in_day % 1_000_000;
    let time = format!("{:02}:{:02}:{:02}", secs / 3600, secs / 60 % 60, secs % 60);
    if frac == 0 {
        format!("{} {time}", format_date(days))
    } else {
        format!("{} {time}.{frac:06}", format_date(days))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn decimals_scale_round_half_away_from_zero_and_check_their_integer_digits() {
        for (text, p, s, want) in [
            ("12.3", 5, 2, 1230),
            ("-12.345", 5, 2, -1235),
            ("12.344", 5, 2, 1234),
            ("0.005", 5, 2, 1),
            ("-0.004", 5, 2, 0),
            ("999.99", 5, 2, 99999),
            (".5", 3, 0, 1),
            ("7", 10, 0, 7),
            ("1e2", 5, 1, 1000),
            ("1.5E-1", 5, 2, 15),
            ("+3.", 4, 1, 30),
            ("000123.40", 6, 2, 12340),
            ("999999999999999999", 18, 0, 999_999_999_999_999_999),
        ] {
            assert_eq!(parse_decimal(text, p, s), Ok(want), "{text} in ({p},{s})");
        }
        for (text, p, s) in [
            ("1000", 5, 2),
            ("999.995", 5, 2),
            ("abc", 5, 2),
            ("", 5, 2),
            ("1.2.3", 5, 2),
            ("--1", 5, 2),
            ("1e", 5, 2),
            ("1e400", 18, 0),
        ] {
            assert!(parse_decimal(text, p, s).is_err(), "{text} in ({p},{s})");
        }
        assert_eq!(parse_decimal_exact("12.300", 5, 2), Ok(1230));
        assert_eq!(parse_decimal_exact("1.5e-1", 5, 2), Ok(15));
        for inexact in ["0.055", "0.050001", "0.001", "1.5e-3"] {
            assert!(parse_decimal_exact(inexact, 5, 2).is_err(), "{inexact}");
        }
        let e = parse_decimal("1000", 5, 2).unwrap_err();
        assert!(e.contains("at most 3 digits"), "{e}");
    }

    #[test]
    fn decimal_text_keeps_every_digit_of_the_scale() {
        assert_eq!(format_decimal(1230, 2), "12.30");
        assert_eq!(format_decimal(-5, 2), "-0.05");
        assert_eq!(format_decimal(7, 0), "7");
        assert_eq!(format_decimal(-1, 4), "-0.0001");
    }

    #[test]
    fn dates_and_datetimes_read_and_print_mysql_text() {
        assert_eq!(parse_date("1970-01-01"), Ok(0));
        assert_eq!(parse_date("2024-02-29"), Ok(19_782));
        assert_eq!(parse_date("1969-12-31"), Ok(-1));
        assert_eq!(parse_date("1998-12-01 10:00:00"), parse_date("1998-12-01"));
        for bad in [
            "2023-02-29",
            "2024-13-01",
            "2024-1-01",
            "20240101",
            "",
            "0000-01-01",
        ] {
            assert!(parse_date(bad).is_err(), "{bad}");
        }
        assert_eq!(parse_datetime("1970-01-01 00:00:01", 0), Ok(1_000_000));
        assert_eq!(parse_datetime("1970-01-01T00:00:01.5", 6), Ok(1_500_000));
        // Rounded to the column's fractional digits.
        assert_eq!(parse_datetime("1970-01-01 00:00:01.5", 0), Ok(2_000_000));
        assert_eq!(
            parse_datetime("1970-01-01 00:00:00.1234567", 6),
            Ok(123_457)
        );
        for bad in [
            "2024-01-01 24:00:00",
            "2024-01-01 10:00",
            "2024-01-01x10:00:00",
        ] {
            assert!(parse_datetime(bad, 0).is_err(), "{bad}");
        }
        assert_eq!(format_date(19_782), "2024-02-29");
        assert_eq!(format_datetime(1_500_000), "1970-01-01 00:00:01.500000");
        assert_eq!(format_datetime(-1_000_000), "1969-12-31 23:59:59");
        assert_eq!(
            parse_datetime("9999-12-31 23:59:59.999999", 6).map(format_datetime),
            Ok("9999-12-31 23:59:59.999999".to_string())
        );
    }

    proptest! {
        #[test]
        fn days_and_civil_dates_are_inverse(days in MIN_DAY..=MAX_DAY) {
            let (y, m, d) = civil_from_days(days);
            prop_assert!((1..=12).contains(&m) && d >= 1 && d <= days_in_month(y, m));
            prop_assert_eq!(days_from_civil(y, m, d), days);
            prop_assert_eq!(parse_date(&format_date(days)), Ok(days));
        }

        #[test]
        fn datetimes_round_trip_through_their_text(
            micros in MIN_DAY * MICROS_PER_DAY..(MAX_DAY + 1) * MICROS_PER_DAY,
        ) {
            prop_assert_eq!(parse_datetime(&format_datetime(micros), 6), Ok(micros));
        }

        /// Against a model: the exact value as a rational, rounded half away from zero.
        #[test]
        fn decimal_parsing_matches_exact_rounding(
            int in 0u64..1_000_000, frac in 0u64..1_000_000, frac_digits in 0usize..7,
            negative: bool, scale in 0u8..6,
        ) {
            let frac = frac % 10u64.pow(frac_digits as u32);
            let text = if frac_digits == 0 {
                format!("{}{int}", if negative { "-" } else { "" })
            } else {
                format!("{}{int}.{frac:0frac_digits$}", if negative { "-" } else { "" })
            };
            // value × 10^frac_digits, then to scale with half-away rounding.
            let exact = i128::from(int) * pow10(frac_digits as u32) + i128::from(frac);
            let s = i64::from(scale) - frac_digits as i64;
            let want = if s >= 0 {
                exact * pow10(s as u32)
            } else {
                let d = pow10((-s) as u32);
                (exact + d / 2) / d
            };
            let want = if negative { -want } else { want };
            let got = parse_decimal(&text, 18, scale);
            prop_assert_eq!(got.map(i128::from), Ok(want));
            let exact = s >= 0 || (int == 0 && frac == 0) || {
                let d = pow10((-s) as u32);
                (i128::from(int) * pow10(frac_digits as u32) + i128::from(frac)) % d == 0
            };
            prop_assert_eq!(parse_decimal_exact(&text, 18, scale).is_ok(), exact);
            prop_assert_eq!(
                parse_decimal(&format_decimal(want, scale), 18, scale).map(i128::from),
                Ok(want)
            );
        }
    }
}
