//! Statements read from stdin (`stratus sql` without `-e`).
//!
//! A statement ends at a line whose last non-blank character is `;` (the `;` is dropped).
//! Text after the last such line, if not blank, is one more statement. A `;` in the middle of
//! a line does not end a statement, so `SELECT 1; SELECT 2;` on one line is one (invalid)
//! statement: put each statement's end on its own line.

/// The statements of `input`, trimmed, blank ones dropped.
pub fn split(input: &str) -> Vec<String> {
    let mut out = Vec::new();
    let mut current = String::new();
    for line in input.lines() {
        let trimmed = line.trim_end();
        if let Some(body) = trimmed.strip_suffix(';') {
            current.push_str(body);
            push(&mut out, &mut current);
        } else {
            current.push_str(line);
            current.push('\n');
        }
    }
    push(&mut out, &mut current);
    out
}

fn push(out: &mut Vec<String>, current: &mut String) {
    let s = current.trim();
    if !s.is_empty() {
        out.push(s.to_string());
    }
    current.clear();
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn statements_end_at_lines_ending_in_a_semicolon() {
        let input = "CREATE TABLE t (\n  id INT PRIMARY KEY\n);\nINSERT INTO t VALUES (1);\n\nSELECT * FROM t\n";
        assert_eq!(
            split(input),
            [
                "CREATE TABLE t (\n  id INT PRIMARY KEY\n)",
                "INSERT INTO t VALUES (1)",
                "SELECT * FROM t"
            ]
        );
    }

    #[test]
    fn blank_input_and_lone_semicolons_give_no_statements() {
        assert!(split("\n  \n;\n ; \n").is_empty());
    }
}
