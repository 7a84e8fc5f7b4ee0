//! Where `stratus` keeps its state, and which cluster `sql` and `load` talk to.
//!
//! The state dir is `$STRATUS_HOME` if set, else `$HOME/.stratus`. It holds the cluster file of
//! the running `stratus up` (`cluster.toml`), that cluster's data (`data/`, unless `up` was
//! given `--data-dir`) and the prompt's history (`history`).
//!
//! `sql` and `load` take the cluster from `--cluster FILE`, else `$STRATUS_CLUSTER`, else the
//! state dir's `cluster.toml`. A file named by the flag or the variable is used as given (a
//! missing one is the cluster file's own error, naming it); the state dir's file must exist, or
//! the command says how to get a cluster.

use std::ffi::OsString;
use std::path::{Path, PathBuf};

/// The variable naming the state dir.
pub const HOME_VAR: &str = "STRATUS_HOME";
/// The variable naming a cluster file.
pub const CLUSTER_VAR: &str = "STRATUS_CLUSTER";
/// The cluster file's name in the state dir.
pub const CLUSTER_FILE: &str = "cluster.toml";

#[derive(Debug, thiserror::Error)]
pub enum StateDirError {
    #[error("no state dir: expected ${HOME_VAR} or $HOME to be set, found neither")]
    NoHome,
    #[error(
        "no cluster: start one with `stratus up` or pass --cluster FILE (looked for {})",
        looked_for.display()
    )]
    NoCluster { looked_for: PathBuf },
}

/// The state dir from the environment: `$STRATUS_HOME`, else `$HOME/.stratus`.
pub fn state_dir() -> Result<PathBuf, StateDirError> {
    state_dir_from(std::env::var_os(HOME_VAR), std::env::var_os("HOME"))
}

/// [`state_dir`] for given values of `$STRATUS_HOME` and `$HOME` (empty counts as unset).
pub fn state_dir_from(
    stratus_home: Option<OsString>,
    home: Option<OsString>,
) -> Result<PathBuf, StateDirError> {
    let set = |v: Option<OsString>| v.filter(|v| !v.is_empty()).map(PathBuf::from);
    if let Some(dir) = set(stratus_home) {
        return Ok(dir);
    }
    set(home)
        .map(|h| h.join(".stratus"))
        .ok_or(StateDirError::NoHome)
}

/// The cluster file `stratus up` writes in `state_dir`.
pub fn cluster_file_in(state_dir: &Path) -> PathBuf {
    state_dir.join(CLUSTER_FILE)
}

/// The prompt's history file in `state_dir`.
pub fn history_file_in(state_dir: &Path) -> PathBuf {
    state_dir.join("history")
}

/// The cluster file to use: `flag`, else `$STRATUS_CLUSTER`, else the state dir's.
pub fn find_cluster_file(flag: Option<&Path>) -> Result<PathBuf, StateDirError> {
    let state = state_dir();
    find_cluster_file_from(flag, std::env::var_os(CLUSTER_VAR), state)
}

/// [`find_cluster_file`] for a given `$STRATUS_CLUSTER` and state dir (so tests need not change
/// the process environment).
pub fn find_cluster_file_from(
    flag: Option<&Path>,
    cluster_var: Option<OsString>,
    state_dir: Result<PathBuf, StateDirError>,
) -> Result<PathBuf, StateDirError> {
    if let Some(path) = flag {
        return Ok(path.to_path_buf());
    }
    if let Some(path) = cluster_var.filter(|v| !v.is_empty()) {
        return Ok(PathBuf::from(path));
    }
    let path = cluster_file_in(&state_dir?);
    if path.is_file() {
        Ok(path)
    } else {
        Err(StateDirError::NoCluster { looked_for: path })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn stratus_home_wins_over_home() {
        let dir = state_dir_from(Some("/s".into()), Some("/h".into())).unwrap();
        assert_eq!(dir, Path::new("/s"));
        let dir = state_dir_from(None, Some("/h".into())).unwrap();
        assert_eq!(dir, Path::new("/h/.stratus"));
        let dir = state_dir_from(Some("".into()), Some("/h".into())).unwrap();
        assert_eq!(dir, Path::new("/h/.stratus"));
        assert!(matches!(
            state_dir_from(None, None),
            Err(StateDirError::NoHome)
        ));
    }

    #[test]
    fn the_flag_wins_over_the_variable_and_the_state_dir() {
        let state = tempfile::tempdir().unwrap();
        std::fs::write(cluster_file_in(state.path()), "").unwrap();
        let found = find_cluster_file_from(
            Some(Path::new("/flag.toml")),
            Some("/var.toml".into()),
            Ok(state.path().to_path_buf()),
        )
        .unwrap();
        assert_eq!(found, Path::new("/flag.toml"));
    }

    #[test]
    fn the_variable_wins_over_the_state_dir() {
        let state = tempfile::tempdir().unwrap();
        std::fs::write(cluster_file_in(state.path()), "").unwrap();
        let found = find_cluster_file_from(
            None,
            Some("/var.toml".into()),
            Ok(state.path().to_path_buf()),
        )
        .unwrap();
        assert_eq!(found, Path::new("/var.toml"));
    }

    #[test]
    fn the_state_dir_file_is_used_when_it_exists() {
        let state = tempfile::tempdir().unwrap();
        let file = cluster_file_in(state.path());
        std::fs::write(&file, "").unwrap();
        let found = find_cluster_file_from(None, None, Ok(state.path().to_path_buf())).unwrap();
        assert_eq!(found, file);
    }

    #[test]
    fn no_cluster_anywhere_says_how_to_get_one_and_where_it_looked() {
        let state = tempfile::tempdir().unwrap();
        let e = find_cluster_file_from(None, Some("".into()), Ok(state.path().to_path_buf()))
            .unwrap_err()
            .to_string();
        assert!(
            e.starts_with("no cluster: start one with `stratus up`"),
            "{e}"
        );
        assert!(
            e.contains(&cluster_file_in(state.path()).display().to_string()),
            "{e}"
        );
    }
}
