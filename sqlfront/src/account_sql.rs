//! The account statements, parsed here (the SQL parser takes neither MySQL's
//! `'user'@'host'` nor `IDENTIFIED BY`) and run against the cluster's users
//! (`client::sql::users`):
//!
//! ```text
//! CREATE USER [IF NOT EXISTS] user [IDENTIFIED [WITH mysql_native_password] BY 'pw'] [, ...]
//! DROP USER [IF EXISTS] user [, ...]
//! ALTER USER [IF EXISTS] user IDENTIFIED [WITH mysql_native_password] BY 'pw'
//! SET PASSWORD [FOR user] = 'pw'
//! GRANT privileges ON level TO user [, ...]
//! REVOKE privileges ON level FROM user [, ...]
//! SHOW GRANTS [FOR user | FOR CURRENT_USER[()]]
//!
//! user       = name | 'name' | "name" | `name`, optionally @'%'
//! privileges = ALL [PRIVILEGES] | priv [, priv ...]
//! priv       = SELECT | INSERT | UPDATE | DELETE | CREATE | DROP | ALTER | INDEX
//!            | CREATE USER | SUPER
//! level      = *.* | * | test.* | test.table | table
//! ```
//!
//! A host other than `%` is refused (users are names: see `client::sql::users`).
//!
//! Who may run them: the global `CREATE USER` privilege (`root` has it) for all but
//! `SHOW GRANTS` of oneself and `SET PASSWORD` of one's own password.

use client::sql::users::{self, Account, GrantLevel, Privilege, Privileges};

use crate::DATABASE;
use crate::accounts::{Accounts, native_hash};
use crate::error::FrontError;
use crate::output::{Cell, ColumnKind, Output, ResultColumn};

/// A parsed account statement.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum AccountStatement {
    CreateUser {
        if_not_exists: bool,
        users: Vec<(String, String)>,
    },
    DropUser {
        if_exists: bool,
        users: Vec<String>,
    },
    /// `ALTER USER ... IDENTIFIED BY` and `SET PASSWORD`: `user` `None` is the current one.
    SetPassword {
        if_exists: bool,
        user: Option<String>,
        password: String,
    },
    Grant {
        privileges: Privileges,
        level: GrantLevel,
        users: Vec<String>,
    },
    Revoke {
        privileges: Privileges,
        level: GrantLevel,
        users: Vec<String>,
    },
    /// `None`: the current user.
    ShowGrants {
        user: Option<String>,
    },
}

/// A token of an account statement.
#[derive(Debug, Clone, PartialEq, Eq)]
enum Tok {
    /// A bare word, uppercased when compared as a keyword (`raw` kept for names).
    Word(String),
    /// A quoted string or a backtick-quoted name, unescaped.
    Quoted(String),
    /// `@ , = * . ( ) ;`
    Sym(char),
}

fn lex(sql: &str) -> Result<Vec<Tok>, FrontError> {
    let mut out = Vec::new();
    let mut chars = sql.chars().peekable();
    while let Some(&c) = chars.peek() {
        if c.is_whitespace() {
            chars.next();
        } else if c.is_alphanumeric() || c == '_' || c == '$' {
            let mut w = String::new();
            while let Some(&c) = chars.peek() {
                if c.is_alphanumeric() || c == '_' || c == '$' {
                    w.push(c);
                    chars.next();
                } else {
                    break;
                }
            }
            out.push(Tok::Word(w));
        } else if c == '\'' || c == '"' || c == '`' {
            chars.next();
            let mut s = String::new();
            loop {
                match chars.next() {
                    None => {
                        return Err(parse_error(format!("unterminated {c}quoted{c} text")));
                    }
                    Some('\\') if c != '`' => match chars.next() {
                        Some('n') => s.push('\n'),
                        Some('t') => s.push('\t'),
                        Some('0') => s.push('\0'),
                        Some(other) => s.push(other),
                        None => return Err(parse_error("a trailing backslash".into())),
                    },
                    Some(q) if q == c => {
                        // A doubled quote is one quote character.
                        if chars.peek() == Some(&c) {
                            chars.next();
                            s.push(c);
                        } else {
                            break;
                        }
                    }
                    Some(other) => s.push(other),
                }
            }
            out.push(Tok::Quoted(s));
        } else if "@,=*.();".contains(c) {
            chars.next();
            out.push(Tok::Sym(c));
        } else {
            return Err(parse_error(format!("unexpected character {c:?}")));
        }
    }
    while out.last() == Some(&Tok::Sym(';')) {
        out.pop();
    }
    Ok(out)
}

fn parse_error(message: String) -> FrontError {
    FrontError::Parse { message }
}

/// `sql` as an account statement; `None` when it is not one (it goes to the SQL parser).
pub fn parse(sql: &str) -> Option<Result<AccountStatement, FrontError>> {
    // The first two words decide, without copying the statement (every statement passes
    // here): `SET PASSWORD=...` and `SHOW GRANTS;` split at any non-word character.
    let mut words = sql
        .split(|c: char| !(c.is_alphanumeric() || c == '_'))
        .filter(|w| !w.is_empty());
    let first = words.next().unwrap_or("");
    let second = words.next().unwrap_or("");
    let is = |w: &str, kw: &str| w.eq_ignore_ascii_case(kw);
    let is_account = is(first, "GRANT")
        || is(first, "REVOKE")
        || (is(second, "USER") && ["CREATE", "DROP", "ALTER"].iter().any(|k| is(first, k)))
        || (is(first, "SET") && is(second, "PASSWORD"))
        || (is(first, "SHOW") && is(second, "GRANTS"));
    if !is_account {
        return None;
    }
    Some(lex(sql).and_then(|toks| Parser { toks, at: 0 }.statement()))
}

struct Parser {
    toks: Vec<Tok>,
    at: usize,
}

impl Parser {
    fn peek(&self) -> Option<&Tok> {
        self.toks.get(self.at)
    }

    fn is_word(&self, kw: &str) -> bool {
        matches!(self.peek(), Some(Tok::Word(w)) if w.eq_ignore_ascii_case(kw))
    }

    fn eat_word(&mut self, kw: &str) -> bool {
        let yes = self.is_word(kw);
        if yes {
            self.at += 1;
        }
        yes
    }

    fn expect_word(&mut self, kw: &str) -> Result<(), FrontError> {
        if self.eat_word(kw) {
            Ok(())
        } else {
            Err(self.expected(kw))
        }
    }

    fn eat_sym(&mut self, c: char) -> bool {
        let yes = self.peek() == Some(&Tok::Sym(c));
        if yes {
            self.at += 1;
        }
        yes
    }

    fn expect_sym(&mut self, c: char) -> Result<(), FrontError> {
        if self.eat_sym(c) {
            Ok(())
        } else {
            Err(self.expected(&c.to_string()))
        }
    }

    fn expected(&self, what: &str) -> FrontError {
        let found = match self.peek() {
            None => "the end of the statement".to_string(),
            Some(Tok::Word(w)) => w.clone(),
            Some(Tok::Quoted(s)) => format!("'{s}'"),
            Some(Tok::Sym(c)) => c.to_string(),
        };
        parse_error(format!("expected {what}, found {found}"))
    }

    fn end(&self) -> Result<(), FrontError> {
        match self.peek() {
            None => Ok(()),
            Some(_) => Err(self.expected("the end of the statement")),
        }
    }

    fn statement(mut self) -> Result<AccountStatement, FrontError> {
        let s = if self.eat_word("CREATE") {
            self.expect_word("USER")?;
            let if_not_exists = self.if_clause(&["IF", "NOT", "EXISTS"])?;
            let mut users = Vec::new();
            loop {
                let user = self.user()?;
                let password = if self.is_word("IDENTIFIED") {
                    self.identified()?
                } else {
                    String::new()
                };
                users.push((user, password));
                if !self.eat_sym(',') {
                    break;
                }
            }
            AccountStatement::CreateUser {
                if_not_exists,
                users,
            }
        } else if self.eat_word("DROP") {
            self.expect_word("USER")?;
            let if_exists = self.if_clause(&["IF", "EXISTS"])?;
            AccountStatement::DropUser {
                if_exists,
                users: self.users()?,
            }
        } else if self.eat_word("ALTER") {
            self.expect_word("USER")?;
            let if_exists = self.if_clause(&["IF", "EXISTS"])?;
            let user = if self.eat_word("USER") {
                self.expect_sym('(')?;
                self.expect_sym(')')?;
                None
            } else {
                Some(self.user()?)
            };
            AccountStatement::SetPassword {
                if_exists,
                user,
                password: self.identified()?,
            }
        } else if self.eat_word("SET") {
            self.expect_word("PASSWORD")?;
            let user = if self.eat_word("FOR") {
                Some(self.user()?)
            } else {
                None
            };
            self.expect_sym('=')?;
            AccountStatement::SetPassword {
                if_exists: false,
                user,
                password: self.string("the new password")?,
            }
        } else if self.eat_word("GRANT") {
            let (privileges, level) = self.privileges_on()?;
            self.expect_word("TO")?;
            let users = self.users()?;
            if self.is_word("WITH") {
                return Err(FrontError::unsupported(
                    "WITH GRANT OPTION (granting needs the global CREATE USER privilege)",
                ));
            }
            AccountStatement::Grant {
                privileges,
                level,
                users,
            }
        } else if self.eat_word("REVOKE") {
            let (privileges, level) = self.privileges_on()?;
            self.expect_word("FROM")?;
            AccountStatement::Revoke {
                privileges,
                level,
                users: self.users()?,
            }
        } else if self.eat_word("SHOW") {
            self.expect_word("GRANTS")?;
            let user = if self.eat_word("FOR") {
                if self.eat_word("CURRENT_USER") {
                    if self.eat_sym('(') {
                        self.expect_sym(')')?;
                    }
                    None
                } else {
                    Some(self.user()?)
                }
            } else {
                None
            };
            AccountStatement::ShowGrants { user }
        } else {
            return Err(self.expected("an account statement"));
        };
        self.end()?;
        Ok(s)
    }

    /// `IF [NOT] EXISTS` when the next words are `words`.
    fn if_clause(&mut self, words: &[&str]) -> Result<bool, FrontError> {
        if !self.is_word(words[0]) {
            return Ok(false);
        }
        for w in words {
            self.expect_word(w)?;
        }
        Ok(true)
    }

    /// `IDENTIFIED [WITH mysql_native_password] BY 'pw'`.
    fn identified(&mut self) -> Result<String, FrontError> {
        self.expect_word("IDENTIFIED")?;
        if self.eat_word("WITH") {
            match self.peek() {
                Some(Tok::Word(p) | Tok::Quoted(p))
                    if p.eq_ignore_ascii_case("mysql_native_password") =>
                {
                    self.at += 1;
                }
                _ => {
                    return Err(FrontError::unsupported(format!(
                        "an authentication plugin other than mysql_native_password: {}",
                        self.expected("mysql_native_password")
                    )));
                }
            }
        }
        self.expect_word("BY")?;
        self.string("a password")
    }

    fn string(&mut self, what: &str) -> Result<String, FrontError> {
        match self.peek() {
            Some(Tok::Quoted(s)) => {
                let s = s.clone();
                self.at += 1;
                Ok(s)
            }
            _ => Err(self.expected(&format!("{what} in quotes"))),
        }
    }

    fn users(&mut self) -> Result<Vec<String>, FrontError> {
        let mut users = vec![self.user()?];
        while self.eat_sym(',') {
            users.push(self.user()?);
        }
        Ok(users)
    }

    /// A user name with an optional `@'%'`.
    fn user(&mut self) -> Result<String, FrontError> {
        let name = match self.peek() {
            Some(Tok::Word(w) | Tok::Quoted(w)) => w.clone(),
            _ => return Err(self.expected("a user name")),
        };
        self.at += 1;
        if self.eat_sym('@') {
            let host = match self.peek() {
                Some(Tok::Word(h) | Tok::Quoted(h)) => h.clone(),
                Some(Tok::Sym('%')) => "%".into(),
                _ => return Err(self.expected("a host")),
            };
            self.at += 1;
            if host != "%" {
                return Err(FrontError::unsupported(format!(
                    "a host other than '%' (users log in from any address): found '{host}'"
                )));
            }
        }
        users::check_name(&name)?;
        Ok(name)
    }

    /// `privileges ON level`.
    fn privileges_on(&mut self) -> Result<(Privileges, GrantLevel), FrontError> {
        let mut all = false;
        let mut privileges = Privileges::NONE;
        if self.eat_word("ALL") {
            self.eat_word("PRIVILEGES");
            all = true;
        } else {
            loop {
                privileges = privileges.with(self.privilege()?);
                if !self.eat_sym(',') {
                    break;
                }
            }
        }
        self.expect_word("ON")?;
        self.eat_word("TABLE");
        let level = self.level()?;
        if all {
            return Ok((Privileges::all_at(&level), level));
        }
        if level != GrantLevel::Global
            && let Some(p) = privileges.iter().find(|p| p.global_only())
        {
            return Err(parse_error(format!(
                "expected {} ON *.* (a global privilege), found it ON {}",
                p.name(),
                level.sql(DATABASE)
            )));
        }
        Ok((privileges, level))
    }

    fn privilege(&mut self) -> Result<Privilege, FrontError> {
        let word = match self.peek() {
            Some(Tok::Word(w)) => w.to_ascii_uppercase(),
            _ => return Err(self.expected("a privilege")),
        };
        self.at += 1;
        Ok(match word.as_str() {
            "SELECT" => Privilege::Select,
            "INSERT" => Privilege::Insert,
            "UPDATE" => Privilege::Update,
            "DELETE" => Privilege::Delete,
            "CREATE" if self.eat_word("USER") => Privilege::CreateUser,
            "CREATE" => Privilege::Create,
            "DROP" => Privilege::Drop,
            "ALTER" => Privilege::Alter,
            "INDEX" => Privilege::Index,
            "SUPER" => Privilege::Super,
            other => {
                return Err(parse_error(format!(
                    "expected a privilege (SELECT, INSERT, UPDATE, DELETE, CREATE, DROP, ALTER, \
                     INDEX, CREATE USER, SUPER or ALL), found {other}"
                )));
            }
        })
    }

    /// `*.*`, `*`, `db.*`, `db.table`, `table`.
    fn level(&mut self) -> Result<GrantLevel, FrontError> {
        let first = self.name_or_star()?;
        if !self.eat_sym('.') {
            return Ok(match first {
                None => GrantLevel::Database,
                Some(t) => GrantLevel::Table(t.to_ascii_lowercase()),
            });
        }
        let second = self.name_or_star()?;
        match (first, second) {
            (None, None) => Ok(GrantLevel::Global),
            (None, Some(_)) => Err(parse_error("expected *.* or db.*, found *.<table>".into())),
            (Some(db), _) if !db.eq_ignore_ascii_case(DATABASE) => {
                Err(FrontError::UnknownDatabase {
                    expected: DATABASE,
                    found: db,
                })
            }
            (Some(_), None) => Ok(GrantLevel::Database),
            (Some(_), Some(t)) => Ok(GrantLevel::Table(t.to_ascii_lowercase())),
        }
    }

    /// A name, or `None` for `*`.
    fn name_or_star(&mut self) -> Result<Option<String>, FrontError> {
        let n = match self.peek() {
            Some(Tok::Sym('*')) => None,
            Some(Tok::Word(w) | Tok::Quoted(w)) => Some(w.clone()),
            _ => return Err(self.expected("a table, a database or *")),
        };
        self.at += 1;
        Ok(n)
    }
}

/// Who runs a statement: an operator (an in-process front: `stratus sql`, `demo`, `bench`,
/// which hold the cluster's own credentials) or a user who logged in to the endpoint.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Principal {
    Operator,
    User(String),
}

impl Principal {
    fn name(&self) -> &str {
        match self {
            Principal::Operator => users::ROOT,
            Principal::User(u) => u,
        }
    }
}

/// Runs `stmt` for `who`.
pub async fn execute(
    accounts: &Accounts,
    who: &Principal,
    stmt: AccountStatement,
) -> Result<Output, FrontError> {
    let client = accounts.client();
    let own = |user: &Option<String>| user.as_deref().is_none_or(|u| u == who.name());
    let needs_admin = match &stmt {
        AccountStatement::ShowGrants { user } | AccountStatement::SetPassword { user, .. } => {
            !own(user)
        }
        _ => true,
    };
    if needs_admin && let Principal::User(name) = who {
        let account = accounts.get(name).await?;
        crate::privileges::check(
            name,
            account.as_deref(),
            &[crate::privileges::Need::Global(Privilege::CreateUser)],
        )?;
    }
    match stmt {
        AccountStatement::CreateUser {
            if_not_exists,
            users: list,
        } => {
            for (name, password) in list {
                users::update(client, &name, "CREATE USER", |stored| match stored {
                    Some(_) if if_not_exists => Ok(stored),
                    Some(_) => Err(user_error("CREATE USER", &name, "the user exists")),
                    None => Ok(Some(Account::new(&name, native_hash(&password)))),
                })
                .await?;
                accounts.forget(&name);
            }
            Ok(Output::ok(0))
        }
        AccountStatement::DropUser {
            if_exists,
            users: list,
        } => {
            for name in list {
                users::update(client, &name, "DROP USER", |stored| match stored {
                    None if if_exists => Ok(None),
                    None => Err(user_error("DROP USER", &name, "no such user")),
                    Some(_) => Ok(None),
                })
                .await?;
                accounts.forget(&name);
            }
            Ok(Output::ok(0))
        }
        AccountStatement::SetPassword {
            if_exists,
            user,
            password,
        } => {
            let name = user.unwrap_or_else(|| who.name().to_string());
            users::update(client, &name, "ALTER USER", |stored| match stored {
                None if if_exists => Ok(None),
                None => Err(user_error("ALTER USER", &name, "no such user")),
                Some(mut a) => {
                    a.auth = native_hash(&password);
                    Ok(Some(a))
                }
            })
            .await?;
            accounts.forget(&name);
            Ok(Output::ok(0))
        }
        AccountStatement::Grant {
            privileges,
            level,
            users: list,
        } => {
            change_grants(accounts, "GRANT", &list, |a| {
                a.grant(level.clone(), privileges)
            })
            .await
        }
        AccountStatement::Revoke {
            privileges,
            level,
            users: list,
        } => change_grants(accounts, "REVOKE", &list, |a| a.revoke(&level, privileges)).await,
        AccountStatement::ShowGrants { user } => {
            let name = user.unwrap_or_else(|| who.name().to_string());
            let account =
                users::load(client, &name)
                    .await?
                    .ok_or_else(|| FrontError::UserOperation {
                        operation: "SHOW GRANTS",
                        user: name.clone(),
                        reason: "no such user",
                    })?;
            Ok(show_grants(&account))
        }
    }
}

/// `GRANT` or `REVOKE` (`operation`) for each user of `list`: `change` applied to its stored
/// account; a missing user is an error (the users before it keep their change, as in MySQL).
async fn change_grants(
    accounts: &Accounts,
    operation: &'static str,
    list: &[String],
    change: impl Fn(&mut Account),
) -> Result<Output, FrontError> {
    for name in list {
        users::update(accounts.client(), name, operation, |stored| match stored {
            None => Err(user_error(operation, name, "no such user")),
            Some(mut a) => {
                change(&mut a);
                Ok(Some(a))
            }
        })
        .await?;
        accounts.forget(name);
    }
    Ok(Output::ok(0))
}

fn user_error(operation: &'static str, user: &str, reason: &'static str) -> FrontError {
    FrontError::UserOperation {
        operation,
        user: user.to_string(),
        reason,
    }
}

/// `SHOW GRANTS`: one `GRANT` statement per level, MySQL's way (`USAGE` for none).
fn show_grants(a: &Account) -> Output {
    let title = format!("Grants for {}@%", a.name);
    let mut rows: Vec<Vec<Cell>> = a
        .grants
        .iter()
        .map(|g| {
            let all = Privileges::all_at(&g.level);
            let list = if g.privileges == all {
                "ALL PRIVILEGES".to_string()
            } else {
                g.privileges
                    .iter()
                    .map(Privilege::name)
                    .collect::<Vec<_>>()
                    .join(", ")
            };
            vec![Cell::Text(format!(
                "GRANT {list} ON {} TO `{}`@`%`",
                g.level.sql(DATABASE),
                a.name
            ))]
        })
        .collect();
    if rows.is_empty() {
        rows.push(vec![Cell::Text(format!(
            "GRANT USAGE ON *.* TO `{}`@`%`",
            a.name
        ))]);
    }
    Output {
        columns: vec![ResultColumn {
            name: title,
            kind: ColumnKind::Text,
        }],
        rows,
        ..Output::default()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn p(sql: &str) -> AccountStatement {
        parse(sql).expect("an account statement").unwrap()
    }

    fn err(sql: &str) -> String {
        parse(sql)
            .expect("an account statement")
            .unwrap_err()
            .to_string()
    }

    #[test]
    fn account_statements_parse_as_mysql_writes_them() {
        assert_eq!(
            p("CREATE USER 'alice'@'%' IDENTIFIED BY 'it''s', bob"),
            AccountStatement::CreateUser {
                if_not_exists: false,
                users: vec![("alice".into(), "it's".into()), ("bob".into(), "".into())],
            }
        );
        assert_eq!(
            p("create user if not exists `Carol` identified with mysql_native_password by \"x\";"),
            AccountStatement::CreateUser {
                if_not_exists: true,
                users: vec![("Carol".into(), "x".into())],
            }
        );
        assert_eq!(
            p("DROP USER IF EXISTS alice, 'bob'@'%'"),
            AccountStatement::DropUser {
                if_exists: true,
                users: vec!["alice".into(), "bob".into()],
            }
        );
        assert_eq!(
            p("GRANT SELECT, INSERT ON test.* TO 'alice'@'%'"),
            AccountStatement::Grant {
                privileges: Privileges::NONE
                    .with(Privilege::Select)
                    .with(Privilege::Insert),
                level: GrantLevel::Database,
                users: vec!["alice".into()],
            }
        );
        assert_eq!(
            p("GRANT ALL PRIVILEGES ON *.* TO alice"),
            AccountStatement::Grant {
                privileges: Privileges::all_at(&GrantLevel::Global),
                level: GrantLevel::Global,
                users: vec!["alice".into()],
            }
        );
        assert_eq!(
            p("REVOKE UPDATE, CREATE ON T FROM alice"),
            AccountStatement::Revoke {
                privileges: Privileges::NONE
                    .with(Privilege::Update)
                    .with(Privilege::Create),
                level: GrantLevel::Table("t".into()),
                users: vec!["alice".into()],
            }
        );
        assert_eq!(
            p("GRANT CREATE USER ON *.* TO a"),
            AccountStatement::Grant {
                privileges: Privileges::NONE.with(Privilege::CreateUser),
                level: GrantLevel::Global,
                users: vec!["a".into()],
            }
        );
        assert_eq!(
            p("SET PASSWORD = 'n'"),
            AccountStatement::SetPassword {
                if_exists: false,
                user: None,
                password: "n".into(),
            }
        );
        assert_eq!(
            p("ALTER USER bob IDENTIFIED BY 'n'"),
            AccountStatement::SetPassword {
                if_exists: false,
                user: Some("bob".into()),
                password: "n".into(),
            }
        );
        assert_eq!(
            p("SHOW GRANTS FOR CURRENT_USER()"),
            AccountStatement::ShowGrants { user: None }
        );
        assert_eq!(
            p("show grants for 'x'"),
            AccountStatement::ShowGrants {
                user: Some("x".into())
            }
        );
        assert!(parse("SELECT 1").is_none());
        assert!(parse("CREATE TABLE t (id INT)").is_none());
    }

    #[test]
    fn bad_account_statements_say_what_was_expected() {
        let cases = [
            ("CREATE USER 'a'@'localhost'", "a host other than '%'"),
            ("GRANT FLY ON *.* TO a", "expected a privilege"),
            ("GRANT SELECT ON other.* TO a", "unknown database"),
            ("GRANT SUPER ON test.* TO a", "SUPER ON *.*"),
            (
                "GRANT SELECT ON *.* TO a WITH GRANT OPTION",
                "WITH GRANT OPTION",
            ),
            ("CREATE USER a IDENTIFIED BY", "a password in quotes"),
            ("CREATE USER 'unterminated", "unterminated"),
            ("DROP USER a b", "the end of the statement"),
            ("CREATE USER ''", "1 to 32 characters"),
            (
                "CREATE USER a IDENTIFIED WITH caching_sha2_password BY 'x'",
                "mysql_native_password",
            ),
        ];
        for (sql, want) in cases {
            let e = err(sql);
            assert!(e.contains(want), "{sql}: {e}");
        }
    }

    #[test]
    fn show_grants_lists_each_level_as_a_grant_statement() {
        let mut a = Account::new("alice", None);
        let out = show_grants(&a);
        assert_eq!(
            out.rows,
            vec![vec![Cell::Text("GRANT USAGE ON *.* TO `alice`@`%`".into())]]
        );
        a.grant(GrantLevel::Global, Privileges::all_at(&GrantLevel::Global));
        a.grant(
            GrantLevel::Table("t".into()),
            Privileges::NONE
                .with(Privilege::Select)
                .with(Privilege::Delete),
        );
        let out = show_grants(&a);
        assert_eq!(
            out.rows,
            vec![
                vec![Cell::Text(
                    "GRANT ALL PRIVILEGES ON *.* TO `alice`@`%`".into()
                )],
                vec![Cell::Text(
                    "GRANT SELECT, DELETE ON `test`.`t` TO `alice`@`%`".into()
                )],
            ]
        );
    }
}
