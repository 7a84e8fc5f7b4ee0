//! How a result set is printed: the `--format` choice and the text of one value.

use client::sql::QueryResult;
use wire::datum::Datum;

#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum Format {
    /// Aligned columns with a header and a "(N rows)" footer; NULL shows as NULL.
    Table,
    /// RFC 4180 CSV with a header line; NULL is an empty unquoted field, the empty string is
    /// `""`.
    Csv,
    /// One JSON array of objects; NULL is `null`.
    Json,
}

/// The output of one statement: its result set in `format`, or `OK, N row(s) affected` for a
/// statement without columns. Ends with a newline.
pub fn render(result: &QueryResult, format: Format) -> String {
    if result.columns.is_empty() {
        return affected(result.affected_rows);
    }
    match format {
        Format::Table => crate::table_format::render(&result.columns, &result.rows),
        Format::Csv => crate::csv_format::render(&result.columns, &result.rows),
        Format::Json => crate::json_format::render(&result.columns, &result.rows),
    }
}

/// `OK, 1 row affected` / `OK, N rows affected`.
pub fn affected(n: u64) -> String {
    format!("OK, {n} {} affected\n", rows_word(n))
}

pub fn rows_word(n: u64) -> &'static str {
    if n == 1 { "row" } else { "rows" }
}

/// The text of a non-NULL value (`None` for NULL): integers in decimal, doubles in Rust's
/// shortest round-trip form (always with a `.` or exponent, so `2.0` stays a double), bytes
/// as UTF-8 (invalid sequences replaced).
pub fn text(d: &Datum) -> Option<String> {
    match d {
        Datum::Null => None,
        Datum::Int(i) => Some(i.to_string()),
        Datum::UInt(u) => Some(u.to_string()),
        Datum::Real(r) => Some(format!("{r:?}")),
        Datum::Bytes(b) => Some(String::from_utf8_lossy(b).into_owned()),
    }
}

/// Numbers are right-aligned in a table.
pub fn is_number(d: &Datum) -> bool {
    matches!(d, Datum::Int(_) | Datum::UInt(_) | Datum::Real(_))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_statement_without_columns_prints_the_affected_rows() {
        let r = QueryResult {
            affected_rows: 3,
            ..QueryResult::default()
        };
        assert_eq!(render(&r, Format::Json), "OK, 3 rows affected\n");
        assert_eq!(affected(1), "OK, 1 row affected\n");
        assert_eq!(affected(0), "OK, 0 rows affected\n");
    }

    #[test]
    fn doubles_keep_a_fraction_and_null_has_no_text() {
        assert_eq!(text(&Datum::Real(2.0)).as_deref(), Some("2.0"));
        assert_eq!(text(&Datum::Real(0.25)).as_deref(), Some("0.25"));
        assert_eq!(text(&Datum::Int(-7)).as_deref(), Some("-7"));
        assert_eq!(text(&Datum::Null), None);
    }
}
