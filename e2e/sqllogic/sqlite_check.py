#!/usr/bin/env python3
"""Checks the expectations of the sqllogictest suite (e2e/sqllogic/*.slt) against SQLite.

The suite's expected answers are MySQL's. The Rust test (e2e/tests/sqllogic.rs) checks that the
Stratus endpoint gives them; this script checks that they are right by running every record
in SQLite, an engine that shares no code with Stratus or DataFusion (python3's stdlib sqlite3,
in memory, one connection per file, records in file order):

* `statement ok` must succeed, `statement count N` must change N rows;
* `statement error` / `query error` must fail too (SQLite's message is not compared: the
  regex is MySQL's);
* `query` rows must equal the expected ones, compared value by value: NULL as `NULL`, the
  empty string as `(empty)`, and numbers numerically (a value that reads as a number on both
  sides is compared as a number: `80` and `80.0` are equal, `2.5` and `2.5000` too), so that
  SQLite's float formatting and MySQL's decimal scale do not count as disagreements;
  `rowsort` and `valuesort` sort both sides.

Records marked `skipif sqlite` (or `onlyif <other engine>`) are those whose MySQL answer
differs from SQLite's on purpose (the files' comments say why): MySQL-only statements (SHOW,
DESCRIBE, USE, SET, @@variables), `<=>`, bit operators, LEFT / RIGHT (keywords in SQLite),
LIKE under the binary collation (SQLite's LIKE ignores case), a number compared with a text
literal, ROUND to tens, UPDATE assignments applied left to right, NULL primary keys, scalar
subqueries of several rows, DROP of several tables, names qualified with the database `test`.
They are counted and skipped; `onlyif sqlite` records stand in for them where SQLite needs
another spelling to reach the same state.

SQLite lacks some of MySQL's scalar functions; the few the suite uses are registered here with
MySQL's semantics (NULL in, NULL out), so the queries around them are still checked: CONCAT,
CONCAT_WS, LPAD, RPAD, REPEAT, REVERSE, GREATEST, LEAST, CHAR_LENGTH, and the math functions
SQLite has only when built with them (POW, POWER, CEIL, FLOOR, SQRT). One statement form is
rewritten: `TRUNCATE TABLE t` as `DELETE FROM t`, and `START TRANSACTION` as `BEGIN`.

Usage: sqlite_check.py [DIR] (default: this script's directory). Prints what it checked and
skipped; exits 1 on any disagreement, 2 when a file does not parse.
"""

import math
import os
import re
import sqlite3
import sys

ENGINE = "sqlite"


class Record:
    def __init__(self, path, line, kind, header, sql, expected, conditions):
        self.path = path
        self.line = line
        self.kind = kind  # "statement" or "query"
        self.header = header  # the words after the kind
        self.sql = sql
        self.expected = expected  # result lines (query), or None
        self.conditions = conditions  # [("skipif"|"onlyif", label)]

    def where(self):
        return f"{os.path.basename(self.path)}:{self.line}"

    def skipped(self):
        for cond, label in self.conditions:
            if cond == "skipif" and label == ENGINE:
                return True
            if cond == "onlyif" and label != ENGINE:
                return True
        return False


def fail(message):
    print(f"sqlite_check: {message}")
    sys.exit(2)


def parse(path):
    """The statement and query records of one file (sqllogictest syntax, the subset used)."""
    with open(path, encoding="utf-8") as f:
        lines = f.read().split("\n")
    records = []
    conditions = []
    i = 0
    while i < len(lines):
        line = lines[i].strip()
        if not line or line.startswith("#"):
            i += 1
            continue
        words = line.split()
        if words[0] in ("skipif", "onlyif"):
            conditions.append((words[0], words[1]))
            i += 1
            continue
        if words[0] in ("statement", "query"):
            start = i + 1
            i += 1
            sql_lines = []
            while i < len(lines) and lines[i].strip() and lines[i].strip() != "----":
                sql_lines.append(lines[i])
                i += 1
            expected = None
            if i < len(lines) and lines[i].strip() == "----":
                i += 1
                expected = []
                while i < len(lines) and lines[i].strip():
                    expected.append(lines[i])
                    i += 1
            records.append(
                Record(path, start, words[0], words[1:], "\n".join(sql_lines), expected, conditions)
            )
            conditions = []
            continue
        if words[0] in ("hash-threshold", "halt", "control", "sleep", "connection"):
            fail(f"{path}:{i + 1}: {words[0]} is not handled by this checker")
        fail(f"{path}:{i + 1}: cannot parse: {line}")
    return records


# MySQL functions SQLite lacks, with MySQL's semantics for the arguments the suite gives.
def _nulls(f):
    def g(*args):
        if any(a is None for a in args):
            return None
        return f(*args)

    return g


def _text(v):
    if isinstance(v, float) and v.is_integer():
        return str(int(v))
    return str(v)


def _pad(s, n, p, left):
    s, n = _text(s), int(n)
    if n <= len(s):
        return s[:n]
    fill = (p * n)[: n - len(s)]
    return fill + s if left else s + fill


def _concat_ws(sep, *args):
    if sep is None:
        return None
    return sep.join(_text(a) for a in args if a is not None)


def _round_int(f):
    def g(x):
        r = f(x)
        return int(r) if isinstance(x, int) else float(r)

    return _nulls(g)


FUNCTIONS = [
    ("concat", -1, _nulls(lambda *a: "".join(_text(x) for x in a))),
    ("concat_ws", -1, _concat_ws),
    ("lpad", 3, _nulls(lambda s, n, p: _pad(s, n, p, True))),
    ("rpad", 3, _nulls(lambda s, n, p: _pad(s, n, p, False))),
    ("repeat", 2, _nulls(lambda s, n: _text(s) * max(int(n), 0))),
    ("reverse", 1, _nulls(lambda s: _text(s)[::-1])),
    ("greatest", -1, _nulls(lambda *a: max(a))),
    ("least", -1, _nulls(lambda *a: min(a))),
    ("char_length", 1, _nulls(lambda s: len(_text(s)))),
    ("pow", 2, _nulls(lambda a, b: float(a) ** float(b))),
    ("power", 2, _nulls(lambda a, b: float(a) ** float(b))),
    ("ceil", 1, _round_int(math.ceil)),
    ("floor", 1, _round_int(math.floor)),
    ("sqrt", 1, _nulls(lambda x: math.sqrt(x) if x >= 0 else None)),
]


def connect():
    conn = sqlite3.connect(":memory:", isolation_level=None)
    for name, nargs, f in FUNCTIONS:
        conn.create_function(name, nargs, f, deterministic=True)
    return conn


def rewrite(sql):
    m = re.match(r"\s*TRUNCATE\s+TABLE\s+(\w+)\s*;?\s*$", sql, re.I)
    if m:
        return f"DELETE FROM {m.group(1)}"
    if re.match(r"\s*START\s+TRANSACTION\s*;?\s*$", sql, re.I):
        return "BEGIN"
    return sql


def cell(v):
    if v is None:
        return "NULL"
    if isinstance(v, bytes):
        v = v.decode("utf-8", "replace")
    if isinstance(v, float):
        return repr(v)
    v = str(v)
    return v if v else "(empty)"


NUMBER = re.compile(r"^[+-]?(\d+\.?\d*|\.\d+)([eE][+-]?\d+)?$")


def canon(token):
    """A token as compared: numbers by value, the rest as text."""
    if not NUMBER.match(token):
        return token
    if re.match(r"^[+-]?\d+$", token):
        return str(int(token))
    f = float(token)
    if f.is_integer() and abs(f) < 1e15:
        return str(int(f))
    return "%.12g" % f


def canon_lines(lines):
    return [tuple(canon(t) for t in line.split()) for line in lines]


def expected_rows(record):
    return canon_lines(record.expected or [])


def actual_rows(rows, mode):
    lines = [" ".join(cell(v) for v in row) for row in rows]
    if mode == "valuesort":
        lines = [cell(v) for row in rows for v in row]
    return canon_lines(lines)


def check_file(path, stats):
    conn = connect()
    mismatches = []
    for r in parse(path):
        if r.skipped():
            stats["skipped_" + r.kind] += 1
            continue
        stats["checked_" + r.kind] += 1
        want_error = len(r.header) > 0 and r.header[0] == "error"
        cur = conn.cursor()
        try:
            cur.execute(rewrite(r.sql))
            rows = cur.fetchall() if r.kind == "query" else None
            changed = cur.rowcount
        except sqlite3.Error as e:
            if not want_error:
                mismatches.append(f"{r.where()}: SQLite fails: {e}\n  {r.sql}")
            continue
        if want_error:
            mismatches.append(f"{r.where()}: SQLite succeeds where an error is expected\n  {r.sql}")
            continue
        if r.kind == "statement":
            if len(r.header) == 2 and r.header[0] == "count" and changed != int(r.header[1]):
                mismatches.append(
                    f"{r.where()}: SQLite changed {changed} rows, expected {r.header[1]}\n  {r.sql}"
                )
            continue
        mode = r.header[1] if len(r.header) > 1 else "nosort"
        got = actual_rows(rows, mode)
        want = expected_rows(r)
        if mode in ("rowsort", "valuesort"):
            got, want = sorted(got), sorted(want)
        if got != want:
            show = lambda rs: "\n".join("    " + " ".join(row) for row in rs) or "    (no rows)"
            mismatches.append(
                f"{r.where()}: rows differ\n  {r.sql}\n  expected:\n{show(want)}\n  SQLite:\n{show(got)}"
            )
    conn.close()
    return mismatches


def main():
    directory = sys.argv[1] if len(sys.argv) > 1 else os.path.dirname(os.path.abspath(__file__))
    files = sorted(f for f in os.listdir(directory) if f.endswith(".slt"))
    stats = {k: 0 for k in ("checked_query", "checked_statement", "skipped_query", "skipped_statement")}
    mismatches = []
    for f in files:
        mismatches += check_file(os.path.join(directory, f), stats)
    queries = stats["checked_query"] + stats["skipped_query"]
    checked = stats["checked_query"] + stats["checked_statement"]
    skipped = stats["skipped_query"] + stats["skipped_statement"]
    print(
        f"sqlite_check: {len(files)} files; checked {checked} records "
        f"({stats['checked_query']} queries, {stats['checked_statement']} statements), "
        f"skipped {skipped} (skipif sqlite: {stats['skipped_query']} queries, "
        f"{stats['skipped_statement']} statements); "
        f"{stats['checked_query'] * 100 // max(queries, 1)}% of queries checked"
    )
    for m in mismatches:
        print("MISMATCH " + m)
    if mismatches:
        print(f"sqlite_check: {len(mismatches)} mismatches")
        sys.exit(1)
    print("sqlite_check: no mismatch")


if __name__ == "__main__":
    main()
