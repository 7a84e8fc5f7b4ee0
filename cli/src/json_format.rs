//! `--format json`: one JSON array with an object per row, keys in column order.
//!
//! ```text
//! [
//!   {"id":1,"name":"alpha"},
//!   {"id":2,"name":null}
//! ]
//! ```
//!
//! NULL is `null`; integers and finite doubles are JSON numbers; a non-finite double (never
//! stored, but an aggregate could produce one) is the string `"NaN"`, `"inf"` or `"-inf"`;
//! bytes are a JSON string (invalid UTF-8 replaced). With two columns of the same name the
//! object has that key twice; name them apart with `AS`.

use serde_json::Value;
use wire::datum::Datum;

use crate::output_format::text;

pub fn render(columns: &[String], rows: &[Vec<Datum>]) -> String {
    if rows.is_empty() {
        return "[]\n".into();
    }
    let keys: Vec<String> = columns.iter().map(|c| string(c)).collect();
    let mut out = String::from("[\n");
    for (i, row) in rows.iter().enumerate() {
        let members: Vec<String> = keys
            .iter()
            .zip(row)
            .map(|(k, d)| format!("{k}:{}", value(d)))
            .collect();
        out.push_str("  {");
        out.push_str(&members.join(","));
        out.push('}');
        if i + 1 < rows.len() {
            out.push(',');
        }
        out.push('\n');
    }
    out.push_str("]\n");
    out
}

fn string(s: &str) -> String {
    Value::String(s.to_string()).to_string()
}

fn value(d: &Datum) -> String {
    match d {
        Datum::Null => "null".into(),
        Datum::Int(i) => i.to_string(),
        Datum::UInt(u) => u.to_string(),
        Datum::Real(r) => match serde_json::Number::from_f64(*r) {
            Some(n) => n.to_string(),
            None => string(&r.to_string()),
        },
        Datum::Bytes(_) => string(&text(d).unwrap_or_default()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn s(x: &str) -> Datum {
        Datum::Bytes(x.as_bytes().to_vec())
    }

    #[test]
    fn null_is_null_and_the_empty_string_is_a_string() {
        let out = render(
            &["id".into(), "s".into()],
            &[vec![Datum::Int(1), Datum::Null], vec![Datum::Int(2), s("")]],
        );
        assert_eq!(
            out,
            "[\n  {\"id\":1,\"s\":null},\n  {\"id\":2,\"s\":\"\"}\n]\n"
        );
    }

    #[test]
    fn strings_and_keys_are_escaped() {
        let out = render(&["a\"b".into()], &[vec![s("q\"\\\n\t\u{1}")]]);
        assert_eq!(out, "[\n  {\"a\\\"b\":\"q\\\"\\\\\\n\\t\\u0001\"}\n]\n");
        let parsed: Value = serde_json::from_str(&out).unwrap();
        assert_eq!(parsed[0]["a\"b"], "q\"\\\n\t\u{1}");
    }

    #[test]
    fn keys_keep_column_order_and_numbers_are_numbers() {
        let out = render(
            &["z".into(), "a".into(), "m".into()],
            &[vec![Datum::Int(-1), Datum::UInt(2), Datum::Real(0.5)]],
        );
        assert_eq!(out, "[\n  {\"z\":-1,\"a\":2,\"m\":0.5}\n]\n");
    }

    #[test]
    fn an_empty_result_is_an_empty_array() {
        assert_eq!(render(&["a".into()], &[]), "[]\n");
    }

    #[test]
    fn a_non_finite_double_is_a_string() {
        let out = render(&["r".into()], &[vec![Datum::Real(f64::NAN)]]);
        assert_eq!(out, "[\n  {\"r\":\"NaN\"}\n]\n");
    }
}
