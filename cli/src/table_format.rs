//! `--format table`: aligned columns for a person.
//!
//! ```text
//!  id | name
//! ----+-------
//!   1 | alpha
//!   2 | NULL
//! (2 rows)
//! ```
//!
//! Columns are as wide as their widest cell (in characters); a column holding only numbers (and
//! NULLs) is right-aligned, header included, any other left-aligned; NULL shows as `NULL`.
//! Tabs, newlines, carriage returns and backslashes inside a value are shown escaped (`\t`,
//! `\n`, `\r`, `\\`) so that a row stays on one line.

use wire::datum::Datum;

use crate::output_format::{is_number, rows_word, text};

/// A text cell for [`render`].
pub(crate) fn text_cell(s: &str) -> Datum {
    Datum::Bytes(s.as_bytes().to_vec())
}

/// Column names for [`render`].
pub(crate) fn column_names(names: &[&str]) -> Vec<String> {
    names.iter().map(|c| c.to_string()).collect()
}

pub fn render(columns: &[String], rows: &[Vec<Datum>]) -> String {
    let cells: Vec<Vec<String>> = rows
        .iter()
        .map(|row| {
            row.iter()
                .map(|d| text(d).map_or_else(|| "NULL".to_string(), |s| escape(&s)))
                .collect()
        })
        .collect();
    let header: Vec<String> = columns.iter().map(|c| escape(c)).collect();
    let mut widths: Vec<usize> = header.iter().map(|h| width(h)).collect();
    for row in &cells {
        for (i, s) in row.iter().enumerate() {
            if let Some(w) = widths.get_mut(i) {
                *w = (*w).max(width(s));
            }
        }
    }
    // A column of numbers (NULLs aside) is right-aligned, header and NULLs included.
    let numeric: Vec<bool> = (0..columns.len())
        .map(|i| {
            let cells = rows
                .iter()
                .filter_map(|r| r.get(i))
                .filter(|d| !d.is_null());
            cells.clone().next().is_some() && cells.into_iter().all(is_number)
        })
        .collect();
    let mut out = String::new();
    let head: Vec<String> = header
        .iter()
        .zip(&widths)
        .zip(&numeric)
        .map(|((h, &w), &num)| pad(h, w, num))
        .collect();
    push_line(&mut out, &head);
    let rule: Vec<String> = widths.iter().map(|&w| "-".repeat(w + 2)).collect();
    out.push_str(&rule.join("+"));
    out.push('\n');
    for row in &cells {
        let line: Vec<String> = row
            .iter()
            .zip(widths.iter().zip(&numeric))
            .map(|(s, (&w, &num))| pad(s, w, num))
            .collect();
        push_line(&mut out, &line);
    }
    let n = rows.len() as u64;
    out.push_str(&format!("({n} {})\n", rows_word(n)));
    out
}

/// ` a | b ` with the trailing spaces of the last column cut.
fn push_line(out: &mut String, cells: &[String]) {
    let line: Vec<String> = cells.iter().map(|c| format!(" {c} ")).collect();
    out.push_str(line.join("|").trim_end());
    out.push('\n');
}

fn pad(s: &str, w: usize, right: bool) -> String {
    let fill = " ".repeat(w - width(s));
    if right {
        format!("{fill}{s}")
    } else {
        format!("{s}{fill}")
    }
}

fn width(s: &str) -> usize {
    s.chars().count()
}

fn escape(s: &str) -> String {
    s.replace('\\', "\\\\")
        .replace('\t', "\\t")
        .replace('\n', "\\n")
        .replace('\r', "\\r")
}

#[cfg(test)]
mod tests {
    use super::*;

    fn s(x: &str) -> Datum {
        Datum::Bytes(x.as_bytes().to_vec())
    }

    #[test]
    fn columns_align_with_numbers_right_and_text_left() {
        let out = render(
            &["id".into(), "name".into()],
            &[
                vec![Datum::Int(1), s("alpha")],
                vec![Datum::Int(200), Datum::Null],
                vec![Datum::Int(3), s("")],
            ],
        );
        assert_eq!(
            out,
            "  id | name\n\
             -----+-------\n\
             \x20  1 | alpha\n\
             \x20200 | NULL\n\
             \x20  3 |\n\
             (3 rows)\n"
        );
    }

    #[test]
    fn null_in_a_number_column_is_right_aligned() {
        let out = render(&["n".into()], &[vec![Datum::Int(10)], vec![Datum::Null]]);
        assert_eq!(out, "    n\n------\n   10\n NULL\n(2 rows)\n");
    }

    #[test]
    fn an_empty_result_has_a_header_and_zero_rows() {
        let out = render(&["a".into()], &[]);
        assert_eq!(out, " a\n---\n(0 rows)\n");
    }

    #[test]
    fn one_row_says_row() {
        let out = render(&["a".into()], &[vec![Datum::Real(1.5)]]);
        assert_eq!(out, "   a\n-----\n 1.5\n(1 row)\n");
    }

    #[test]
    fn newlines_in_values_stay_on_one_line_and_width_counts_characters() {
        let out = render(&["x".into(), "y".into()], &[vec![s("a\nb"), s("é")]]);
        assert_eq!(out, " x    | y\n------+---\n a\\nb | é\n(1 row)\n");
    }
}
