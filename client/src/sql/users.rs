//! SQL users and their privileges, stored in the cluster itself as the catalog is.
//!
//! One committed row per user under the reserved key prefix [`USER_PREFIX`]
//! (`m_user_<name>`, the name as given: MySQL user names are case-sensitive), value = the
//! account encoded by [`Account::encode`]. Every change is a Percolator transaction that read
//! the row at its `start_ts` ([`update`]), so two entry nodes changing one user at once
//! conflict and one retries: a grant is never lost to a concurrent one.
//!
//! A user is a name: the host part of MySQL's `'user'@'host'` is always `%` (any address).
//! The password is kept as `mysql_native_password` keeps it, SHA1(SHA1(password)) (the
//! protocol lets the server check a login against that without knowing the password), or
//! nothing for an account with no password.
//!
//! Privileges are granted at three levels, as in MySQL: global (`*.*`), the database
//! (`test.*`: the cluster has one, [`crate::sql`]'s `test`) and one table (`test.t`). A
//! statement's privilege on a table is the union of the three.

use super::catalog::get_at;
use super::txn_write::{self, RowWrite};
use super::{Result, SqlError};
use crate::paging::Client;

/// Key prefix of user rows in the cluster (outside the catalog's and the variables').
pub const USER_PREFIX: &[u8] = b"m_user_";
/// The user a fresh cluster has, with every privilege.
pub const ROOT: &str = "root";
/// Version byte of [`Account::encode`]'s layout.
pub const FORMAT_VERSION: u8 = 1;
/// How many times a change of one user retries after a concurrent change of it.
const UPDATE_ATTEMPTS: usize = 8;
/// The longest user name MySQL 8 accepts.
pub const MAX_NAME_LEN: usize = 32;

/// One privilege (a bit of [`Privileges`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
#[repr(u16)]
pub enum Privilege {
    Select = 1,
    Insert = 1 << 1,
    Update = 1 << 2,
    Delete = 1 << 3,
    /// `CREATE TABLE`.
    Create = 1 << 4,
    /// `DROP TABLE`, `TRUNCATE TABLE`.
    Drop = 1 << 5,
    /// Schema changes of a table (none but the index statements exist yet).
    Alter = 1 << 6,
    /// `CREATE INDEX`, `DROP INDEX`.
    Index = 1 << 7,
    /// `CREATE USER`, `DROP USER`, `ALTER USER`, `GRANT`, `REVOKE`, another user's password
    /// (global only).
    CreateUser = 1 << 8,
    /// `SET GLOBAL` (global only; MySQL's `SUPER` / `SYSTEM_VARIABLES_ADMIN`).
    Super = 1 << 9,
}

impl Privilege {
    /// Every privilege, in the order `SHOW GRANTS` lists them.
    pub const ALL: [Privilege; 10] = [
        Privilege::Select,
        Privilege::Insert,
        Privilege::Update,
        Privilege::Delete,
        Privilege::Create,
        Privilege::Drop,
        Privilege::Alter,
        Privilege::Index,
        Privilege::CreateUser,
        Privilege::Super,
    ];

    /// MySQL's name of the privilege.
    pub fn name(self) -> &'static str {
        match self {
            Privilege::Select => "SELECT",
            Privilege::Insert => "INSERT",
            Privilege::Update => "UPDATE",
            Privilege::Delete => "DELETE",
            Privilege::Create => "CREATE",
            Privilege::Drop => "DROP",
            Privilege::Alter => "ALTER",
            Privilege::Index => "INDEX",
            Privilege::CreateUser => "CREATE USER",
            Privilege::Super => "SUPER",
        }
    }

    /// Whether the privilege exists only at the global level.
    pub fn global_only(self) -> bool {
        matches!(self, Privilege::CreateUser | Privilege::Super)
    }
}

/// A set of privileges.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Privileges(u16);

impl Privileges {
    /// No privilege.
    pub const NONE: Privileges = Privileges(0);
    /// Every bit a privilege has.
    const MASK: u16 = (1 << 10) - 1;

    /// Every privilege `level` can hold (`ALL PRIVILEGES` at that level).
    pub fn all_at(level: &GrantLevel) -> Privileges {
        Privilege::ALL
            .iter()
            .filter(|p| matches!(level, GrantLevel::Global) || !p.global_only())
            .fold(Privileges::NONE, |s, p| s.with(*p))
    }

    pub fn with(self, p: Privilege) -> Privileges {
        Privileges(self.0 | p as u16)
    }

    pub fn contains(self, p: Privilege) -> bool {
        self.0 & p as u16 != 0
    }

    pub fn union(self, other: Privileges) -> Privileges {
        Privileges(self.0 | other.0)
    }

    pub fn minus(self, other: Privileges) -> Privileges {
        Privileges(self.0 & !other.0)
    }

    pub fn is_empty(self) -> bool {
        self.0 == 0
    }

    /// The privileges in [`Privilege::ALL`]'s order.
    pub fn iter(self) -> impl Iterator<Item = Privilege> {
        Privilege::ALL
            .into_iter()
            .filter(move |p| self.contains(*p))
    }

    pub fn bits(self) -> u16 {
        self.0
    }
}

/// Where a grant applies.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord)]
pub enum GrantLevel {
    /// `*.*`.
    Global,
    /// `test.*` (the cluster's one database).
    Database,
    /// `test.<table>`, the table's lowercase name.
    Table(String),
}

impl GrantLevel {
    fn tag(&self) -> u8 {
        match self {
            GrantLevel::Global => 0,
            GrantLevel::Database => 1,
            GrantLevel::Table(_) => 2,
        }
    }

    /// How `SHOW GRANTS` writes the level.
    pub fn sql(&self, database: &str) -> String {
        match self {
            GrantLevel::Global => "*.*".into(),
            GrantLevel::Database => format!("`{database}`.*"),
            GrantLevel::Table(t) => format!("`{database}`.`{t}`"),
        }
    }
}

/// One level's privileges.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Grant {
    pub level: GrantLevel,
    pub privileges: Privileges,
}

/// A user: its name, its password's `mysql_native_password` hash and its grants.
#[derive(Clone, PartialEq, Eq)]
pub struct Account {
    pub name: String,
    /// SHA1(SHA1(password)); `None` for an account with no password.
    pub auth: Option<[u8; 20]>,
    /// One entry per level holding privileges, sorted by level (no empty one).
    pub grants: Vec<Grant>,
}

impl std::fmt::Debug for Account {
    // The hash stays out of logs: with the salt of a captured login it checks guesses.
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Account")
            .field("name", &self.name)
            .field("auth", &self.auth.map(|_| "<redacted>"))
            .field("grants", &self.grants)
            .finish()
    }
}

impl Account {
    /// A new user with no privileges.
    pub fn new(name: &str, auth: Option<[u8; 20]>) -> Account {
        Account {
            name: name.to_string(),
            auth,
            grants: Vec::new(),
        }
    }

    /// Whether the user holds `p` on `table` (`None`: a privilege not about one table, held
    /// globally or on the database).
    pub fn allows(&self, p: Privilege, table: Option<&str>) -> bool {
        self.grants.iter().any(|g| {
            g.privileges.contains(p)
                && match &g.level {
                    GrantLevel::Global | GrantLevel::Database => true,
                    GrantLevel::Table(t) => table == Some(t.as_str()),
                }
        })
    }

    /// Whether the user holds `p` globally.
    pub fn allows_globally(&self, p: Privilege) -> bool {
        self.grants
            .iter()
            .any(|g| g.level == GrantLevel::Global && g.privileges.contains(p))
    }

    /// Adds `privileges` at `level`.
    pub fn grant(&mut self, level: GrantLevel, privileges: Privileges) {
        match self.grants.binary_search_by(|g| g.level.cmp(&level)) {
            Ok(i) => self.grants[i].privileges = self.grants[i].privileges.union(privileges),
            Err(i) if !privileges.is_empty() => {
                self.grants.insert(i, Grant { level, privileges });
            }
            Err(_) => {}
        }
    }

    /// Takes `privileges` back at `level` (a level left with none is removed).
    pub fn revoke(&mut self, level: &GrantLevel, privileges: Privileges) {
        if let Ok(i) = self.grants.binary_search_by(|g| g.level.cmp(level)) {
            self.grants[i].privileges = self.grants[i].privileges.minus(privileges);
            if self.grants[i].privileges.is_empty() {
                self.grants.remove(i);
            }
        }
    }

    /// The row's value. Layout (integers big-endian):
    ///
    /// ```text
    /// version u8 (= FORMAT_VERSION)
    /// auth_len u8 (0 or 20) | auth [auth_len]
    /// grant_count u16
    /// per grant, in level order: tag u8 (0 global, 1 database, 2 table)
    ///                            | privileges u16
    ///                            | (tag 2 only) name_len u16 | name (UTF-8)
    /// ```
    ///
    /// The name is the key's, not repeated in the value.
    pub fn encode(&self) -> Vec<u8> {
        let mut b = vec![FORMAT_VERSION];
        match &self.auth {
            Some(h) => {
                b.push(20);
                b.extend_from_slice(h);
            }
            None => b.push(0),
        }
        let count = u16::try_from(self.grants.len()).unwrap_or(u16::MAX);
        b.extend_from_slice(&count.to_be_bytes());
        for g in self.grants.iter().take(usize::from(count)) {
            b.push(g.level.tag());
            b.extend_from_slice(&g.privileges.bits().to_be_bytes());
            if let GrantLevel::Table(t) = &g.level {
                let len = u16::try_from(t.len()).unwrap_or(u16::MAX);
                b.extend_from_slice(&len.to_be_bytes());
                b.extend_from_slice(&t.as_bytes()[..usize::from(len)]);
            }
        }
        b
    }

    /// Decodes the row of user `name`. Only [`Account::encode`]'s output is accepted: levels
    /// strictly increasing, no empty or unknown privileges, no global-only privilege below
    /// the global level, nothing after the last grant.
    pub fn decode(name: &str, data: &[u8]) -> Result<Account> {
        let bad = |reason: String| SqlError::CorruptAccount {
            user: name.to_string(),
            reason,
        };
        let mut r = Reader { name, data, at: 0 };
        let version = r.u8("the format version")?;
        if version != FORMAT_VERSION {
            return Err(bad(format!(
                "expected format version {FORMAT_VERSION}, found {version}"
            )));
        }
        let auth = match r.u8("the password hash length")? {
            0 => None,
            20 => {
                let mut h = [0u8; 20];
                h.copy_from_slice(r.take(20, "the password hash")?);
                Some(h)
            }
            n => {
                return Err(bad(format!(
                    "expected a password hash of 0 or 20 bytes, found {n}"
                )));
            }
        };
        let count = r.u16("the grant count")?;
        let mut grants: Vec<Grant> = Vec::with_capacity(usize::from(count).min(64));
        for _ in 0..count {
            let tag = r.u8("a grant's level")?;
            let bits = r.u16("a grant's privileges")?;
            let level = match tag {
                0 => GrantLevel::Global,
                1 => GrantLevel::Database,
                2 => {
                    let len = r.u16("a table name's length")?;
                    let raw = r.take(usize::from(len), "a table name")?;
                    let t = std::str::from_utf8(raw)
                        .map_err(|_| bad("expected a UTF-8 table name".into()))?;
                    GrantLevel::Table(t.to_string())
                }
                t => return Err(bad(format!("expected a level tag 0..=2, found {t}"))),
            };
            if bits == 0 || bits & !Privileges::MASK != 0 {
                return Err(bad(format!(
                    "expected privilege bits within {:#06x} and not 0, found {bits:#06x}",
                    Privileges::MASK
                )));
            }
            let privileges = Privileges(bits);
            if level != GrantLevel::Global && privileges.iter().any(Privilege::global_only) {
                return Err(bad(format!(
                    "a global-only privilege at level {}",
                    level.sql("test")
                )));
            }
            if grants.last().is_some_and(|g| g.level >= level) {
                return Err(bad("expected grants in increasing level order".into()));
            }
            grants.push(Grant { level, privileges });
        }
        if r.at != data.len() {
            return Err(bad(format!(
                "expected {} bytes, found {} more",
                r.at,
                data.len() - r.at
            )));
        }
        Ok(Account {
            name: name.to_string(),
            auth,
            grants,
        })
    }
}

struct Reader<'a> {
    name: &'a str,
    data: &'a [u8],
    at: usize,
}

impl<'a> Reader<'a> {
    fn take(&mut self, n: usize, what: &str) -> Result<&'a [u8]> {
        let end = self.at.checked_add(n).filter(|e| *e <= self.data.len());
        let Some(end) = end else {
            return Err(SqlError::CorruptAccount {
                user: self.name.to_string(),
                reason: format!(
                    "truncated at {what}: expected {n} bytes at offset {}, found {}",
                    self.at,
                    self.data.len().saturating_sub(self.at)
                ),
            });
        };
        let s = &self.data[self.at..end];
        self.at = end;
        Ok(s)
    }

    fn u8(&mut self, what: &str) -> Result<u8> {
        Ok(self.take(1, what)?[0])
    }

    fn u16(&mut self, what: &str) -> Result<u16> {
        let b = self.take(2, what)?;
        Ok(u16::from_be_bytes([b[0], b[1]]))
    }
}

/// The cluster key of user `name`.
pub fn user_key(name: &str) -> Vec<u8> {
    let mut k = USER_PREFIX.to_vec();
    k.extend_from_slice(name.as_bytes());
    k
}

/// Checks a user name as `CREATE USER` takes it: 1 to [`MAX_NAME_LEN`] characters.
pub fn check_name(name: &str) -> Result<()> {
    let chars = name.chars().count();
    if chars == 0 || chars > MAX_NAME_LEN {
        return Err(SqlError::BadUser {
            reason: format!(
                "expected a user name of 1 to {MAX_NAME_LEN} characters, found {chars}"
            ),
        });
    }
    Ok(())
}

/// User `name` at a fresh timestamp, if it exists.
pub async fn load(client: &Client, name: &str) -> Result<Option<Account>> {
    let ts = client.current_ts().await?;
    match get_at(client, &user_key(name), ts).await? {
        Some(v) => Account::decode(name, &v).map(Some),
        None => Ok(None),
    }
}

/// Changes user `name` in one transaction: `change` gets the stored account (`None`: no such
/// user) and returns what to store (`Some`) or that the row goes (`None`). An error from
/// `change` (the caller's own type) writes nothing. Retried from a fresh read after a
/// concurrent change of the user.
pub async fn update<E: From<SqlError>>(
    client: &Client,
    name: &str,
    statement: &'static str,
    mut change: impl FnMut(Option<Account>) -> Result<Option<Account>, E>,
) -> Result<(), E> {
    let key = user_key(name);
    let mut last_conflict = None;
    for _ in 0..UPDATE_ATTEMPTS {
        let start_ts = client.current_ts().await.map_err(SqlError::from)?;
        let stored = match get_at(client, &key, start_ts).await? {
            Some(v) => Some(Account::decode(name, &v)?),
            None => None,
        };
        let write = match change(stored)? {
            Some(a) => RowWrite::Put {
                key: key.clone(),
                value: a.encode(),
            },
            None => RowWrite::Delete { key: key.clone() },
        };
        match txn_write::write(
            client,
            &[write],
            start_ts,
            statement,
            txn_write::CommitOptions::default(),
        )
        .await
        {
            Ok(_) => return Ok(()),
            Err(e @ SqlError::WriteConflict { .. }) => last_conflict = Some(e),
            Err(e) => return Err(e.into()),
        }
    }
    Err(last_conflict
        .unwrap_or_else(|| SqlError::BadUser {
            reason: format!("{statement} made no attempt"),
        })
        .into())
}

/// Every user, in name order (one scan of the users' key range).
pub async fn list(client: &Client) -> Result<Vec<Account>> {
    let start_ts = client.current_ts().await?;
    let mut end = USER_PREFIX.to_vec();
    if let Some(last) = end.last_mut() {
        *last += 1;
    }
    let entries = client.scan_at(USER_PREFIX.to_vec(), end, start_ts).await?;
    entries
        .iter()
        .map(|e| {
            let raw = &e.key[USER_PREFIX.len().min(e.key.len())..];
            let name = std::str::from_utf8(raw).map_err(|_| SqlError::CorruptAccount {
                user: String::from_utf8_lossy(raw).into_owned(),
                reason: "the user name in the key is not UTF-8".into(),
            })?;
            Account::decode(name, &e.value)
        })
        .collect()
}

/// Creates `root` with every privilege and password hash `auth` when the cluster has no user
/// at all (a fresh one). Whether it did: an existing root keeps its password and grants, and
/// a cluster whose root was dropped on purpose does not get one back.
pub async fn bootstrap_root(client: &Client, auth: Option<[u8; 20]>) -> Result<bool> {
    if !list(client).await?.is_empty() {
        return Ok(false);
    }
    let mut created = false;
    update::<SqlError>(client, ROOT, "bootstrap root", |stored| {
        created = stored.is_none();
        Ok(Some(stored.unwrap_or_else(|| {
            let mut root = Account::new(ROOT, auth);
            root.grant(GrantLevel::Global, Privileges::all_at(&GrantLevel::Global));
            root
        })))
    })
    .await?;
    Ok(created)
}

/// The entry point of the `account_record` fuzz target (and of the proptest below): decodes
/// `data` as a user row. Must return normally for every input; an accepted input has exactly
/// one encoding.
pub fn account_decode_check(data: &[u8]) {
    if let Ok(a) = Account::decode("fuzz", data) {
        assert!(
            a.encode() == data,
            "re-encoding a decoded account changed the bytes"
        );
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn level() -> impl Strategy<Value = GrantLevel> {
        prop_oneof![
            Just(GrantLevel::Global),
            Just(GrantLevel::Database),
            "[a-z_]{1,12}".prop_map(GrantLevel::Table),
        ]
    }

    fn privileges() -> impl Strategy<Value = Privileges> {
        (0u16..(1 << 10)).prop_map(Privileges)
    }

    proptest! {
        /// Grants and revokes applied to an account agree with a model (a map from level to
        /// privilege bits), and the account survives its encoding.
        #[test]
        fn grants_and_revokes_match_a_model_and_round_trip(
            ops in proptest::collection::vec((any::<bool>(), level(), privileges()), 0..40),
            auth in proptest::option::of(any::<[u8; 20]>()),
        ) {
            let mut a = Account::new("u", auth);
            let mut model = std::collections::BTreeMap::<GrantLevel, u16>::new();
            for (grant, level, p) in ops {
                // Global-only privileges are not granted below the global level (the
                // statement refuses that before it gets here).
                let p = if level == GrantLevel::Global { p } else {
                    p.minus(Privileges::NONE.with(Privilege::CreateUser).with(Privilege::Super))
                };
                if grant {
                    a.grant(level.clone(), p);
                    if !p.is_empty() {
                        *model.entry(level).or_default() |= p.bits();
                    }
                } else {
                    a.revoke(&level, p);
                    if let Some(bits) = model.get_mut(&level) {
                        *bits &= !p.bits();
                        if *bits == 0 {
                            model.remove(&level);
                        }
                    }
                }
            }
            let got: Vec<(GrantLevel, u16)> =
                a.grants.iter().map(|g| (g.level.clone(), g.privileges.bits())).collect();
            let want: Vec<(GrantLevel, u16)> = model.into_iter().collect();
            prop_assert_eq!(got, want);
            let back = Account::decode("u", &a.encode()).unwrap();
            prop_assert_eq!(back, a);
        }

        /// Any bytes: decoded or refused, never a panic; what decodes re-encodes to itself.
        #[test]
        fn arbitrary_bytes_decode_or_are_refused(data in proptest::collection::vec(any::<u8>(), 0..64)) {
            account_decode_check(&data);
        }
    }

    #[test]
    fn table_grants_apply_to_their_table_only() {
        let mut a = Account::new("u", None);
        a.grant(
            GrantLevel::Table("t".into()),
            Privileges::NONE.with(Privilege::Select),
        );
        assert!(a.allows(Privilege::Select, Some("t")));
        assert!(!a.allows(Privilege::Select, Some("u")));
        assert!(!a.allows(Privilege::Insert, Some("t")));
        a.grant(
            GrantLevel::Database,
            Privileges::NONE.with(Privilege::Insert),
        );
        assert!(a.allows(Privilege::Insert, Some("u")));
        assert!(!a.allows_globally(Privilege::Insert));
    }

    #[test]
    fn corrupt_rows_are_refused_naming_what_was_expected() {
        let mut a = Account::new("u", Some([7; 20]));
        a.grant(GrantLevel::Global, Privileges::NONE.with(Privilege::Select));
        let good = a.encode();
        let cases: Vec<(Vec<u8>, &str)> = vec![
            (vec![], "truncated at the format version"),
            (vec![9], "format version 1, found 9"),
            (good[..good.len() - 1].to_vec(), "truncated"),
            ([good.clone(), vec![0]].concat(), "more"),
            (vec![1, 3, 0, 0, 0], "0 or 20 bytes"),
            (vec![1, 0, 0, 1, 1, 0x01, 0x00], "global-only"),
            (vec![1, 0, 0, 1, 0, 0, 0], "not 0"),
            (vec![1, 0, 0, 2, 1, 0, 1, 0, 0, 1], "increasing level order"),
        ];
        for (bytes, want) in cases {
            let e = Account::decode("u", &bytes).unwrap_err().to_string();
            assert!(e.contains(want), "{bytes:?}: {e}");
        }
    }
}
