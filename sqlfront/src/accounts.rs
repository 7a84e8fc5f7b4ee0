//! The endpoint's view of the cluster's users (`client::sql::users`): each user's account
//! read through a short-lived cache, and `mysql_native_password`'s arithmetic.
//!
//! **Freshness.** A statement checks its privileges against the account as read at most
//! [`REFRESH`] ago, so a `GRANT` or `REVOKE` made through another entry node applies to the
//! statements that start a second later; one made through this endpoint applies to the very
//! next statement (the endpoint forgets the user it changed). TiDB reloads its privilege
//! cache on a notification instead; a one-second poll per active user costs one read.
//!
//! **`mysql_native_password`.** The server keeps `SHA1(SHA1(password))` and sends a random
//! 20-byte salt; the client answers `SHA1(password) XOR SHA1(salt ‖ SHA1(SHA1(password)))`.
//! XORing the answer with `SHA1(salt ‖ stored)` gives back `SHA1(password)`, whose SHA1 must
//! be the stored value: a login is checked without the password, and a captured answer is
//! useless against another salt.

use std::collections::HashMap;
use std::sync::Arc;
use std::time::{Duration, Instant};

use client::paging::Client;
use client::sql::users::{self, Account};
use sha1::{Digest, Sha1};

use crate::error::FrontError;

/// How long an account read stays the one statements are checked against.
pub const REFRESH: Duration = Duration::from_secs(1);
/// At most this many users cached; a full cache starts again empty (unknown names cannot
/// grow it without bound).
const MAX_CACHED: usize = 1024;
/// Length of the salt and of a `mysql_native_password` answer.
pub const SCRAMBLE_LEN: usize = 20;

/// A user as read at an instant (`None`: there was no such user).
type Cached = (Instant, Option<Arc<Account>>);

/// The cluster's users, cached (module docs). One per endpoint, shared by its connections.
pub struct Accounts {
    client: &'static Client,
    cached: parking_lot::Mutex<HashMap<String, Cached>>,
}

impl std::fmt::Debug for Accounts {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Accounts").finish_non_exhaustive()
    }
}

impl Accounts {
    pub fn new(client: &'static Client) -> Accounts {
        Accounts {
            client,
            cached: parking_lot::Mutex::new(HashMap::new()),
        }
    }

    pub fn client(&self) -> &'static Client {
        self.client
    }

    /// User `name` as read at most [`REFRESH`] ago (`None`: no such user).
    pub async fn get(&self, name: &str) -> Result<Option<Arc<Account>>, FrontError> {
        if let Some((read, account)) = self.cached.lock().get(name)
            && read.elapsed() < REFRESH
        {
            return Ok(account.clone());
        }
        let account = users::load(self.client, name).await?.map(Arc::new);
        let mut cached = self.cached.lock();
        if cached.len() >= MAX_CACHED {
            cached.clear();
        }
        cached.insert(name.to_string(), (Instant::now(), account.clone()));
        Ok(account)
    }

    /// Drops what is cached of `name` (this endpoint just changed it).
    pub fn forget(&self, name: &str) {
        self.cached.lock().remove(name);
    }
}

/// What `mysql_native_password` stores for `password`: `SHA1(SHA1(password))`; `None` for the
/// empty password (an account with no password).
pub fn native_hash(password: &str) -> Option<[u8; 20]> {
    if password.is_empty() {
        return None;
    }
    Some(sha1(&[&sha1(&[password.as_bytes()])]))
}

/// Whether `answer` (the client's login answer to `salt`) proves the password `stored` hashes.
/// An account with no password takes only an empty answer.
pub fn native_login_ok(stored: Option<&[u8; 20]>, salt: &[u8], answer: &[u8]) -> bool {
    let Some(stored) = stored else {
        return answer.is_empty();
    };
    let Ok(answer) = <[u8; 20]>::try_from(answer) else {
        return false;
    };
    let mask = sha1(&[salt, stored]);
    let mut stage1 = [0u8; 20];
    for (i, b) in stage1.iter_mut().enumerate() {
        *b = answer[i] ^ mask[i];
    }
    // Compared in constant time: the time taken says nothing of how many bytes matched.
    let candidate = sha1(&[&stage1]);
    candidate
        .iter()
        .zip(stored.iter())
        .fold(0u8, |acc, (a, b)| acc | (a ^ b))
        == 0
}

/// The answer a client sends for `password` and `salt` (what drivers compute; the tests'
/// client side).
pub fn native_answer(password: &str, salt: &[u8]) -> Vec<u8> {
    if password.is_empty() {
        return Vec::new();
    }
    let stage1 = sha1(&[password.as_bytes()]);
    let stage2 = sha1(&[&stage1]);
    let mask = sha1(&[salt, &stage2]);
    stage1.iter().zip(mask.iter()).map(|(a, b)| a ^ b).collect()
}

/// A fresh salt: printable ASCII without `$` (some clients stop at a NUL, and `$` marks a
/// hash format elsewhere), as MySQL sends.
pub fn new_salt() -> [u8; SCRAMBLE_LEN] {
    let mut salt = [0u8; SCRAMBLE_LEN];
    for b in &mut salt {
        *b = loop {
            let c = rand::random_range(0x21u8..0x7f);
            if c != b'$' {
                break c;
            }
        };
    }
    salt
}

/// A random password for `root` at bootstrap: 20 characters of letters and digits (119 bits).
pub fn new_password() -> String {
    const ALPHABET: &[u8] = b"ABCDEFGHJKLMNPQRSTUVWXYZabcdefghijkmnopqrstuvwxyz23456789";
    (0..20)
        .map(|_| char::from(ALPHABET[rand::random_range(0..ALPHABET.len())]))
        .collect()
}

/// What [`bootstrap`] did.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Bootstrap {
    /// The cluster has users: nothing changed.
    Existing,
    /// `root` was created with the given password.
    Created,
    /// `root` was created with this random password (to be shown once).
    Generated(String),
}

/// Gives a fresh cluster (no user at all) its `root`, with `password` or a random one.
pub async fn bootstrap(client: &Client, password: Option<&str>) -> Result<Bootstrap, FrontError> {
    let (password, generated) = match password {
        Some(p) => (p.to_string(), false),
        None => (new_password(), true),
    };
    if !users::bootstrap_root(client, native_hash(&password)).await? {
        return Ok(Bootstrap::Existing);
    }
    Ok(if generated {
        Bootstrap::Generated(password)
    } else {
        Bootstrap::Created
    })
}

fn sha1(parts: &[&[u8]]) -> [u8; 20] {
    let mut h = Sha1::new();
    for p in parts {
        h.update(p);
    }
    h.finalize().into()
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn a_known_password_hashes_as_mysql_stores_it() {
        // MySQL: SELECT PASSWORD('secret') = '*14E65567ABDB5135D0CFD9A70B3032C179A49EE7'.
        let h = native_hash("secret").unwrap();
        let hex: String = h.iter().map(|b| format!("{b:02X}")).collect();
        assert_eq!(hex, "14E65567ABDB5135D0CFD9A70B3032C179A49EE7");
        assert_eq!(native_hash(""), None);
    }

    proptest! {
        /// The right password logs in against any salt; a wrong one, a truncated answer or
        /// an answer to another salt does not.
        #[test]
        fn only_the_right_password_answers_its_salt(
            pw in "[ -~]{1,24}",
            other in "[ -~]{1,24}",
            salt in any::<[u8; 20]>(),
            salt2 in any::<[u8; 20]>(),
        ) {
            let stored = native_hash(&pw);
            prop_assert!(native_login_ok(stored.as_ref(), &salt, &native_answer(&pw, &salt)));
            prop_assert_eq!(
                native_login_ok(stored.as_ref(), &salt, &native_answer(&other, &salt)),
                pw == other
            );
            let answer = native_answer(&pw, &salt);
            prop_assert!(!native_login_ok(stored.as_ref(), &salt, &answer[..19]));
            prop_assert!(!native_login_ok(stored.as_ref(), &salt, &[]));
            prop_assert_eq!(
                native_login_ok(stored.as_ref(), &salt2, &answer),
                salt == salt2
            );
        }
    }

    #[test]
    fn an_account_without_a_password_takes_only_the_empty_answer() {
        assert!(native_login_ok(None, b"salt", &[]));
        assert!(!native_login_ok(None, b"salt", &[1; 20]));
    }

    #[test]
    fn salts_are_printable_and_passwords_differ() {
        let s = new_salt();
        assert!(s.iter().all(|b| (0x21..0x7f).contains(b) && *b != b'$'));
        assert_ne!(new_password(), new_password());
    }
}
