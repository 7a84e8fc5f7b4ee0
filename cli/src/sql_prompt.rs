//! The interactive prompt of `stratus sql` (no `-e`, stdin a terminal).
//!
//! `stratus> ` asks for a statement, `    -> ` for the rest of one: a statement ends at a `;`
//! outside quotes (`'...'`, `"..."`, `` `...` ``, with `\` escapes and doubled quotes inside),
//! so one line may hold several statements and one statement may span several lines. Each
//! statement runs when its `;` is typed; its error is printed as `Error: ...` and the prompt
//! goes on. `exit` or `quit` (with or without `;`) on an empty prompt, or Ctrl-D, leaves;
//! Ctrl-C drops the statement being typed. Statements are kept in the history file (the state
//! dir's `history`), one entry per statement, across sessions.
//!
//! One SQL session serves the whole prompt, so `SET` variables last until the prompt is left.

use std::io::Write;
use std::path::Path;

use rustyline::DefaultEditor;
use rustyline::error::ReadlineError;
use sqlfront::FrontSession;

use crate::output_format::Format;
use crate::sql_command::{SqlCommandError, connect, execute};

pub const PROMPT: &str = "stratus> ";
pub const CONTINUATION: &str = "    -> ";

/// Text typed so far that does not end a statement yet.
#[derive(Debug, Default, Clone)]
pub struct StatementBuffer {
    pending: String,
}

impl StatementBuffer {
    /// Adds one line; the statements it completed, trimmed, without their `;`, blank ones
    /// dropped. The text after the last `;` stays pending.
    pub fn push_line(&mut self, line: &str) -> Vec<String> {
        if !self.pending.is_empty() {
            self.pending.push('\n');
        }
        self.pending.push_str(line);
        let mut out = Vec::new();
        let mut start = 0;
        let mut quote: Option<char> = None;
        let mut escaped = false;
        for (i, c) in self.pending.char_indices() {
            match quote {
                Some(_) if escaped => escaped = false,
                Some(_) if c == '\\' => escaped = true,
                Some(q) if c == q => quote = None,
                Some(_) => {}
                None if c == '\'' || c == '"' || c == '`' => quote = Some(c),
                None if c == ';' => {
                    let stmt = self.pending[start..i].trim();
                    if !stmt.is_empty() {
                        out.push(stmt.to_string());
                    }
                    start = i + 1;
                }
                None => {}
            }
        }
        self.pending = self.pending[start..].trim_start().to_string();
        out
    }

    /// Nothing but blanks pending: the next line starts a statement.
    pub fn is_empty(&self) -> bool {
        self.pending.trim().is_empty()
    }

    pub fn clear(&mut self) {
        self.pending.clear();
    }
}

/// `exit` / `quit`, any case, with or without a `;`.
pub fn is_exit(line: &str) -> bool {
    let word = line.trim().trim_end_matches(';').trim();
    word.eq_ignore_ascii_case("exit") || word.eq_ignore_ascii_case("quit")
}

/// Runs the prompt against the cluster of `cluster_file` until the user leaves.
pub fn run(
    cluster_file: &Path,
    format: Format,
    history: Option<&Path>,
) -> Result<(), SqlCommandError> {
    let (rt, client) = connect(cluster_file)?;
    let session = &mut FrontSession::new(client);
    let prompt_err = |e: ReadlineError| SqlCommandError::Prompt(e.to_string());
    let mut editor = DefaultEditor::new().map_err(prompt_err)?;
    if let Some(path) = history {
        // A first session has no history yet.
        let _ = editor.load_history(path);
    }
    let mut buffer = StatementBuffer::default();
    loop {
        let prompt = if buffer.is_empty() {
            PROMPT
        } else {
            CONTINUATION
        };
        let line = match editor.readline(prompt) {
            Ok(line) => line,
            Err(ReadlineError::Interrupted) => {
                buffer.clear();
                continue;
            }
            Err(ReadlineError::Eof) => break,
            Err(e) => return Err(prompt_err(e)),
        };
        if buffer.is_empty() && is_exit(&line) {
            break;
        }
        let statements = buffer.push_line(&line);
        for sql in &statements {
            let _ = editor.add_history_entry(format!("{sql};"));
            let mut out = std::io::stdout().lock();
            let mut err = std::io::stderr();
            if let Err(e) = execute(&rt, session, sql, format, &mut out, &mut err) {
                let _ = writeln!(err, "Error: {e}");
            }
        }
        if !statements.is_empty() {
            save_history(&mut editor, history);
        }
    }
    save_history(&mut editor, history);
    Ok(())
}

/// Best effort: a history that cannot be saved is a warning, not a failed session.
fn save_history(editor: &mut DefaultEditor, history: Option<&Path>) {
    let Some(path) = history else { return };
    if let Some(dir) = path.parent() {
        let _ = std::fs::create_dir_all(dir);
    }
    if let Err(e) = editor.save_history(path) {
        eprintln!(
            "Warning: cannot save the history: path={} reason={e}",
            path.display()
        );
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_statement_ends_at_its_semicolon_even_across_lines() {
        let mut b = StatementBuffer::default();
        assert!(b.push_line("SELECT *").is_empty());
        assert!(!b.is_empty());
        assert_eq!(b.push_line("FROM t;"), ["SELECT *\nFROM t"]);
        assert!(b.is_empty());
    }

    #[test]
    fn one_line_may_hold_several_statements_and_the_start_of_another() {
        let mut b = StatementBuffer::default();
        assert_eq!(
            b.push_line("SELECT 1; SELECT 2 ;  SELECT"),
            ["SELECT 1", "SELECT 2"]
        );
        assert_eq!(b.push_line(" 3;"), ["SELECT\n 3"]);
    }

    #[test]
    fn a_semicolon_inside_quotes_does_not_end_the_statement() {
        let mut b = StatementBuffer::default();
        assert!(
            b.push_line("INSERT INTO t VALUES (1, 'a;b', \"c;\", 'it''s;');")
                .len()
                == 1
        );
        assert!(b.push_line("SELECT 'x\\';").is_empty());
        assert_eq!(b.push_line("';"), ["SELECT 'x\\';\n'"]);
        assert!(b.push_line("SELECT `a;b` FROM t").is_empty());
        assert_eq!(b.push_line(";"), ["SELECT `a;b` FROM t"]);
    }

    #[test]
    fn lone_semicolons_and_blank_lines_give_no_statements() {
        let mut b = StatementBuffer::default();
        assert!(b.push_line(" ; ;").is_empty());
        assert!(b.push_line("").is_empty());
        assert!(b.is_empty());
    }

    #[test]
    fn exit_and_quit_leave_in_any_case() {
        assert!(is_exit("exit"));
        assert!(is_exit(" QUIT; "));
        assert!(!is_exit("exit now"));
        assert!(!is_exit("select 1"));
    }
}
