//! Loading a process's TOML config: `--config path` from the command line, every key optional
//! (serde defaults), unknown keys rejected with their name (`deny_unknown_fields` on every
//! section), and the effective config rendered back as TOML for the start-up banner and
//! `GET /config`.

use std::path::{Path, PathBuf};

use serde::Serialize;
use serde::de::DeserializeOwned;

#[derive(Debug, thiserror::Error)]
pub enum ConfigError {
    #[error("bad command line: {0}")]
    Args(String),
    #[error("cannot read config file {path}")]
    Read {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    /// Unknown keys, wrong types and bad values; the message names the key and the line.
    #[error("invalid config {origin}: {message}")]
    Parse { origin: String, message: String },
    /// A value that parses but cannot work (checked after parsing).
    #[error("invalid config value {key}: {message}")]
    Invalid { key: String, message: String },
}

impl ConfigError {
    pub fn invalid(key: &str, message: impl Into<String>) -> ConfigError {
        ConfigError::Invalid {
            key: key.to_string(),
            message: message.into(),
        }
    }
}

/// The `--config path` argument (`--config=path` too); `None` when absent. Any other argument
/// is an error that lists what is accepted.
pub fn config_path_from_args(
    args: impl IntoIterator<Item = String>,
) -> Result<Option<PathBuf>, ConfigError> {
    let mut args = args.into_iter();
    let mut path = None;
    while let Some(a) = args.next() {
        if a == "--config" {
            let p = args
                .next()
                .ok_or_else(|| ConfigError::Args("--config needs a path".into()))?;
            path = Some(PathBuf::from(p));
        } else if let Some(p) = a.strip_prefix("--config=") {
            path = Some(PathBuf::from(p));
        } else {
            return Err(ConfigError::Args(format!(
                "expected `--config <path>` or nothing, found {a:?}"
            )));
        }
    }
    Ok(path)
}

/// Parses `text` (from `origin`, for messages).
pub fn parse<T: DeserializeOwned>(text: &str, origin: &str) -> Result<T, ConfigError> {
    toml::from_str(text).map_err(|e| ConfigError::Parse {
        origin: origin.to_string(),
        message: e.to_string().trim_end().to_string(),
    })
}

/// Reads and parses the file at `path`, or the defaults when `path` is `None`.
pub fn load<T: DeserializeOwned + Default>(path: Option<&Path>) -> Result<T, ConfigError> {
    match path {
        None => Ok(T::default()),
        Some(p) => {
            let text = std::fs::read_to_string(p).map_err(|source| ConfigError::Read {
                path: p.to_path_buf(),
                source,
            })?;
            parse(&text, &p.display().to_string())
        }
    }
}

/// The effective config as TOML.
pub fn render<T: Serialize>(config: &T) -> String {
    toml::to_string(config).unwrap_or_else(|e| format!("# config cannot be rendered: {e}\n"))
}

/// Parses `"\x00"`-style escapes in a key written in a config file: printable ASCII stays as
/// is, `\xNN` is one byte, `\\` is a backslash. TOML literal strings (`'t\x80'`) keep the
/// backslashes for this parser.
pub fn parse_escaped_key(s: &str) -> Result<Vec<u8>, String> {
    let b = s.as_bytes();
    let mut out = Vec::with_capacity(b.len());
    let mut i = 0;
    while i < b.len() {
        if b[i] != b'\\' {
            out.push(b[i]);
            i += 1;
            continue;
        }
        match b.get(i + 1) {
            Some(b'\\') => {
                out.push(b'\\');
                i += 2;
            }
            Some(b'x') => {
                let hex = s.get(i + 2..i + 4).ok_or_else(|| {
                    format!("expected two hex digits after \\x at byte {i}, found end of {s:?}")
                })?;
                let v = u8::from_str_radix(hex, 16).map_err(|_| {
                    format!("expected two hex digits after \\x at byte {i}, found {hex:?}")
                })?;
                out.push(v);
                i += 4;
            }
            _ => return Err(format!("expected \\xNN or \\\\ at byte {i} of {s:?}")),
        }
    }
    Ok(out)
}

/// The inverse of [`parse_escaped_key`], for printing keys back.
pub fn escape_key(key: &[u8]) -> String {
    let mut s = String::with_capacity(key.len());
    for &c in key {
        match c {
            b'\\' => s.push_str("\\\\"),
            0x20..=0x7e => s.push(c as char),
            _ => s.push_str(&format!("\\x{c:02x}")),
        }
    }
    s
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;
    use serde::Deserialize;

    #[derive(Debug, Default, Deserialize, Serialize, PartialEq)]
    #[serde(default, deny_unknown_fields, rename_all = "kebab-case")]
    struct Section {
        block_size: types::ReadableSize,
        name: String,
    }

    #[derive(Debug, Default, Deserialize, Serialize, PartialEq)]
    #[serde(default, deny_unknown_fields, rename_all = "kebab-case")]
    struct Top {
        section: Section,
    }

    #[test]
    fn an_unknown_key_is_named_in_the_error() {
        let err = parse::<Top>("[section]\nblock-sise = 3\n", "t.toml").unwrap_err();
        let msg = err.to_string();
        assert!(msg.contains("block-sise"), "{msg}");
        assert!(msg.contains("t.toml"), "{msg}");
    }

    #[test]
    fn a_bad_value_is_named_in_the_error() {
        let err = parse::<Top>("[section]\nblock-size = \"lots\"\n", "t.toml").unwrap_err();
        let msg = err.to_string();
        assert!(msg.contains("block-size"), "{msg}");
        assert!(msg.contains("lots"), "{msg}");
    }

    #[test]
    fn missing_keys_take_defaults_and_render_back() {
        let top: Top = parse("[section]\nname = \"x\"\n", "t.toml").unwrap();
        assert_eq!(top.section.name, "x");
        let again: Top = parse(&render(&top), "rendered").unwrap();
        assert_eq!(again, top);
    }

    #[test]
    fn only_the_config_flag_is_accepted() {
        let a = |v: &[&str]| config_path_from_args(v.iter().map(|s| s.to_string()));
        assert_eq!(a(&[]).unwrap(), None);
        assert_eq!(a(&["--config", "x.toml"]).unwrap(), Some("x.toml".into()));
        assert_eq!(a(&["--config=y.toml"]).unwrap(), Some("y.toml".into()));
        assert!(a(&["--config"]).is_err());
        assert!(
            a(&["--verbose"])
                .unwrap_err()
                .to_string()
                .contains("--verbose")
        );
    }

    #[test]
    fn escaped_keys_reject_bad_escapes() {
        assert_eq!(parse_escaped_key("t\\x80a").unwrap(), b"t\x80a");
        assert!(parse_escaped_key("t\\x8").is_err());
        assert!(parse_escaped_key("t\\q").is_err());
        assert!(parse_escaped_key("t\\xzz").is_err());
    }

    proptest! {
        #[test]
        fn escaped_keys_round_trip(key in proptest::collection::vec(any::<u8>(), 0..40)) {
            prop_assert_eq!(parse_escaped_key(&escape_key(&key)).unwrap(), key);
        }
    }
}
