//! `LIKE`: bytewise pattern matching with `%`, `_` and `\` escapes.
//!
//! A pattern is parsed once into tokens and then classified: most real patterns are a literal
//! with `%` at one or both ends, which become a byte-slice equality, prefix, suffix or
//! substring check; only the rest go through the general matcher.

use super::operand::{Ctx, Operand};
use crate::batch::Column;
use crate::error::EvalError;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum LikeToken {
    Literal(u8),
    /// `_`: exactly one byte.
    One,
    /// `%`: any run of bytes, empty included.
    Any,
}

/// A compiled LIKE pattern.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum LikePattern {
    /// No wildcard: the whole value equals the literal.
    Exact(Vec<u8>),
    /// `lit%`
    Prefix(Vec<u8>),
    /// `%lit`
    Suffix(Vec<u8>),
    /// `%lit%`
    Contains(Vec<u8>),
    /// Anything else, as tokens (consecutive `%` merged into one).
    General(Vec<LikeToken>),
}

impl LikePattern {
    /// Compiles a pattern: `%` any run, `_` one byte, `\` makes the next byte literal (a
    /// trailing `\` is a literal backslash). Every byte string is a valid pattern.
    pub fn compile(pattern: &[u8]) -> LikePattern {
        let mut tokens = Vec::with_capacity(pattern.len());
        let mut bytes = pattern.iter();
        while let Some(&b) = bytes.next() {
            let t = match b {
                b'\\' => LikeToken::Literal(bytes.next().copied().unwrap_or(b'\\')),
                b'%' => LikeToken::Any,
                b'_' => LikeToken::One,
                b => LikeToken::Literal(b),
            };
            if t == LikeToken::Any && tokens.last() == Some(&LikeToken::Any) {
                continue;
            }
            tokens.push(t);
        }
        Self::classify(tokens)
    }

    fn classify(tokens: Vec<LikeToken>) -> LikePattern {
        if tokens.contains(&LikeToken::One) {
            return LikePattern::General(tokens);
        }
        let starts = tokens.first() == Some(&LikeToken::Any);
        let ends = tokens.len() > usize::from(starts) && tokens.last() == Some(&LikeToken::Any);
        let inner = &tokens[usize::from(starts)..tokens.len() - usize::from(ends)];
        let mut literal = Vec::with_capacity(inner.len());
        for t in inner {
            match t {
                LikeToken::Literal(b) => literal.push(*b),
                _ => return LikePattern::General(tokens),
            }
        }
        match (starts, ends) {
            (false, false) => LikePattern::Exact(literal),
            (false, true) => LikePattern::Prefix(literal),
            // `%` alone: `starts` and not `ends`, an empty literal; every value matches.
            (true, false) => LikePattern::Suffix(literal),
            (true, true) => LikePattern::Contains(literal),
        }
    }

    /// Whether `value` matches the pattern.
    #[inline]
    pub fn matches(&self, value: &[u8]) -> bool {
        match self {
            LikePattern::Exact(l) => value == l.as_slice(),
            LikePattern::Prefix(l) => value.starts_with(l),
            LikePattern::Suffix(l) => value.ends_with(l),
            LikePattern::Contains(l) => {
                l.is_empty() || value.windows(l.len()).any(|w| w == l.as_slice())
            }
            LikePattern::General(tokens) => general_match(tokens, value),
        }
    }
}

/// Wildcard matching with one backtrack point: on a mismatch, the latest `%` takes one more
/// byte and matching resumes after it. Earlier `%`s never need to take more, because the
/// latest one can absorb anything they would. O(len(value) * len(tokens)) at worst.
fn general_match(tokens: &[LikeToken], value: &[u8]) -> bool {
    let (mut t, mut v) = (0, 0);
    // (token index after the latest `%`, value index that `%` matched up to)
    let mut backtrack: Option<(usize, usize)> = None;
    while v < value.len() {
        match tokens.get(t) {
            Some(LikeToken::Any) => {
                backtrack = Some((t + 1, v));
                t += 1;
            }
            Some(LikeToken::One) => {
                t += 1;
                v += 1;
            }
            Some(LikeToken::Literal(b)) if *b == value[v] => {
                t += 1;
                v += 1;
            }
            _ => match backtrack {
                Some((after, taken)) => {
                    backtrack = Some((after, taken + 1));
                    t = after;
                    v = taken + 1;
                }
                None => return false,
            },
        }
    }
    tokens[t.min(tokens.len())..]
        .iter()
        .all(|t| *t == LikeToken::Any)
}

/// `value LIKE pattern` for each logical row; `compiled` is the pattern when it was a
/// constant at build time.
pub(super) fn like(
    compiled: Option<&LikePattern>,
    value: &Operand<'_>,
    pattern: &Operand<'_>,
    ctx: &Ctx<'_>,
) -> Result<Column, EvalError> {
    let n = ctx.n();
    let values = value.bytes(ctx, "LIKE")?;
    let out = match compiled {
        Some(p) => (0..n)
            .map(|i| values.get(i).map(|v| i64::from(p.matches(v))))
            .collect(),
        None => {
            let patterns = pattern.bytes(ctx, "LIKE")?;
            // Patterns of a column often repeat: keep the last one compiled.
            let mut last: Option<(&[u8], LikePattern)> = None;
            let mut out = Vec::with_capacity(n);
            for i in 0..n {
                let (Some(v), Some(p)) = (values.get(i), patterns.get(i)) else {
                    out.push(None);
                    continue;
                };
                if !matches!(&last, Some((raw, _)) if *raw == p.as_slice()) {
                    last = Some((p.as_slice(), LikePattern::compile(p)));
                }
                if let Some((_, compiled)) = &last {
                    out.push(Some(i64::from(compiled.matches(v))));
                }
            }
            out
        }
    };
    Ok(Column::Int(out))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn literal_with_trailing_percent_is_a_prefix_check() {
        assert_eq!(
            LikePattern::compile(b"abc%"),
            LikePattern::Prefix(b"abc".to_vec())
        );
        assert_eq!(
            LikePattern::compile(b"abc%%"),
            LikePattern::Prefix(b"abc".to_vec())
        );
    }

    #[test]
    fn escaped_wildcards_stay_literal() {
        assert_eq!(
            LikePattern::compile(br"a\%b\_%"),
            LikePattern::Prefix(b"a%b_".to_vec())
        );
    }

    #[test]
    fn lone_percent_matches_everything() {
        let p = LikePattern::compile(b"%");
        assert!(p.matches(b""));
        assert!(p.matches(b"xyz"));
    }

    #[test]
    fn general_match_backtracks_to_the_latest_percent() {
        let p = LikePattern::compile(b"a%b_c%d");
        assert!(matches!(p, LikePattern::General(_)));
        assert!(p.matches(b"abxcbycd"));
        assert!(p.matches(b"abxcd"));
        assert!(!p.matches(b"abxc"));
    }
}
