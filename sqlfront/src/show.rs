//! The answers of the catalog statements, from stored schemas: `SHOW TABLES`, `DESCRIBE` /
//! `SHOW COLUMNS`, `SHOW CREATE TABLE`. Column names and layout follow MySQL's, which
//! drivers and tools parse.

use client::sql::TableSchema;

use crate::DATABASE;
use crate::output::{Cell, Output};

/// `SHOW TABLES`: one column `Tables_in_<db>`, a row per table in name order.
pub fn tables(schemas: &[TableSchema]) -> Output {
    let mut names: Vec<&str> = schemas.iter().map(|s| s.name.as_str()).collect();
    names.sort_unstable();
    let column = format!("Tables_in_{DATABASE}");
    Output::text(
        &[column.as_str()],
        names
            .into_iter()
            .map(|n| vec![Cell::Text(n.to_string())])
            .collect(),
    )
}

/// `DESCRIBE t` / `SHOW COLUMNS FROM t`: `Field`, `Type`, `Null`, `Key`, `Default`,
/// `Extra`.
pub fn columns(t: &TableSchema) -> Output {
    let rows = t
        .columns
        .iter()
        .enumerate()
        .map(|(i, c)| {
            let pk = i == t.pk;
            // MySQL's Key: PRI, else UNI for the first column of a unique index on that
            // column alone, else MUL for the first column of any other index.
            let leading: Vec<_> = t.public_indexes().filter(|x| x.columns[0] == i).collect();
            let key = if pk {
                "PRI"
            } else if leading.iter().any(|x| x.unique && x.columns.len() == 1) {
                "UNI"
            } else if !leading.is_empty() {
                "MUL"
            } else {
                ""
            };
            vec![
                Cell::Text(c.name.clone()),
                Cell::Text(c.ty.mysql_text()),
                Cell::Text(if pk { "NO" } else { "YES" }.to_string()),
                Cell::Text(key.to_string()),
                Cell::Null,
                Cell::Text(String::new()),
            ]
        })
        .collect();
    Output::text(&["Field", "Type", "Null", "Key", "Default", "Extra"], rows)
}

/// `SHOW CREATE TABLE t`: `Table`, `Create Table`, the statement that makes the same table.
pub fn create_table(t: &TableSchema) -> Output {
    Output::text(
        &["Table", "Create Table"],
        vec![vec![
            Cell::Text(t.name.clone()),
            Cell::Text(create_statement(t)),
        ]],
    )
}

/// The `CREATE TABLE` statement of `t` (it parses and plans back into the same schema).
pub fn create_statement(t: &TableSchema) -> String {
    let mut lines: Vec<String> = t
        .columns
        .iter()
        .enumerate()
        .map(|(i, c)| {
            let null = if i == t.pk { " NOT NULL" } else { "" };
            format!("  `{}` {}{null}", c.name, c.ty.mysql_text())
        })
        .collect();
    lines.push(format!("  PRIMARY KEY (`{}`)", t.columns[t.pk].name));
    // Indexes still being backfilled are not shown (MySQL shows an index once it exists).
    for x in t.public_indexes() {
        let cols: Vec<String> = x.column_names(t).iter().map(|c| format!("`{c}`")).collect();
        let kind = if x.unique { "UNIQUE KEY" } else { "KEY" };
        lines.push(format!("  {kind} `{}` ({})", x.name, cols.join(",")));
    }
    format!("CREATE TABLE `{}` (\n{}\n)", t.name, lines.join(",\n"))
}

#[cfg(test)]
mod tests {
    use super::*;
    use client::sql::{Plan, SqlType, parse, plan};

    fn schema(sql: &str) -> TableSchema {
        match plan(&parse(sql).unwrap(), &|_| None).unwrap() {
            Plan::CreateTable(s) => s,
            other => panic!("not a create: {other:?}"),
        }
    }

    #[test]
    fn show_create_table_plans_back_into_the_same_schema() {
        let t = schema(
            "CREATE TABLE Orders (n INT, id BIGINT PRIMARY KEY, price DOUBLE, note VARCHAR(20))",
        );
        let again = schema(&create_statement(&t));
        assert_eq!(again, t);
        assert_eq!(again.columns[1].ty, SqlType::BigInt);
    }

    #[test]
    fn show_create_table_keeps_indexes_and_describe_marks_their_columns() {
        let t = schema(
            "CREATE TABLE t (id BIGINT PRIMARY KEY, a INT, b VARCHAR(5), c DOUBLE, \
             UNIQUE KEY ua (a), KEY bc (b, c), INDEX cb (c, b))",
        );
        assert_eq!(t.indexes.len(), 3);
        let text = create_statement(&t);
        assert!(text.contains("UNIQUE KEY `ua` (`a`)"), "{text}");
        assert_eq!(schema(&text), t);
        let d = columns(&t);
        let keys: Vec<&Cell> = d.rows.iter().map(|r| &r[3]).collect();
        assert_eq!(
            keys,
            [
                &Cell::Text("PRI".into()),
                &Cell::Text("UNI".into()),
                &Cell::Text("MUL".into()),
                &Cell::Text("MUL".into())
            ]
        );
    }

    #[test]
    fn describe_marks_the_primary_key_and_show_tables_sorts_names() {
        let t = schema("CREATE TABLE b (id BIGINT PRIMARY KEY, s VARCHAR(5))");
        let d = columns(&t);
        assert_eq!(d.rows[0][3], Cell::Text("PRI".into()));
        assert_eq!(d.rows[1][2], Cell::Text("YES".into()));
        let a = schema("CREATE TABLE a (id INT PRIMARY KEY)");
        let s = tables(&[t, a]);
        assert_eq!(s.columns[0].name, "Tables_in_test");
        assert_eq!(
            s.rows,
            [vec![Cell::Text("a".into())], vec![Cell::Text("b".into())]]
        );
    }
}
