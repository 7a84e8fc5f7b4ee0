//! `--format csv`: RFC 4180 for scripts.
//!
//! A header line of column names, then one record per row, lines ending in CRLF as the RFC
//! says. A field is quoted when it contains a comma, a double quote, CR or LF (quotes doubled
//! inside), or when it is the empty string: NULL is an empty unquoted field and `''` is `""`,
//! so a reader can tell them apart.

use wire::datum::Datum;

use crate::output_format::text;

pub fn render(columns: &[String], rows: &[Vec<Datum>]) -> String {
    let mut out = String::new();
    let header: Vec<String> = columns.iter().map(|c| field(Some(c))).collect();
    push_record(&mut out, &header);
    for row in rows {
        let fields: Vec<String> = row.iter().map(|d| field(text(d).as_deref())).collect();
        push_record(&mut out, &fields);
    }
    out
}

fn push_record(out: &mut String, fields: &[String]) {
    out.push_str(&fields.join(","));
    out.push_str("\r\n");
}

/// One field: `None` (NULL) is empty; the empty string and any text with `,` `"` CR or LF is
/// quoted.
fn field(value: Option<&str>) -> String {
    match value {
        None => String::new(),
        Some(s) if s.is_empty() || s.contains([',', '"', '\r', '\n']) => {
            format!("\"{}\"", s.replace('"', "\"\""))
        }
        Some(s) => s.to_string(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn s(x: &str) -> Datum {
        Datum::Bytes(x.as_bytes().to_vec())
    }

    #[test]
    fn null_is_an_empty_field_and_the_empty_string_is_quoted() {
        let out = render(
            &["id".into(), "s".into()],
            &[vec![Datum::Int(1), Datum::Null], vec![Datum::Int(2), s("")]],
        );
        assert_eq!(out, "id,s\r\n1,\r\n2,\"\"\r\n");
    }

    #[test]
    fn commas_quotes_and_newlines_are_quoted() {
        let out = render(
            &["a,b".into()],
            &[
                vec![s("x,y")],
                vec![s("say \"hi\"")],
                vec![s("l1\nl2")],
                vec![s("cr\r")],
            ],
        );
        assert_eq!(
            out,
            "\"a,b\"\r\n\"x,y\"\r\n\"say \"\"hi\"\"\"\r\n\"l1\nl2\"\r\n\"cr\r\"\r\n"
        );
    }

    #[test]
    fn numbers_are_plain() {
        let out = render(
            &["i".into(), "u".into(), "r".into()],
            &[vec![Datum::Int(-3), Datum::UInt(7), Datum::Real(2.0)]],
        );
        assert_eq!(out, "i,u,r\r\n-3,7,2.0\r\n");
    }
}
