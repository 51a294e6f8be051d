use sqlparser::ast::{self, Statement};
use sqlparser::dialect::MySqlDialect;
use sqlparser::parser::Parser;

use super::*;

fn text(bytes: &[u8]) -> String {
    from_bytes(bytes).expect("converts").into_owned()
}

/// The bytes the hex literal in `sql` stands for.
fn hex_bytes(sql: &str) -> Vec<u8> {
    let at = sql.find("X'").expect("hex literal") + 2;
    let end = at + sql[at..].find('\'').unwrap();
    (at..end)
        .step_by(2)
        .map(|i| u8::from_str_radix(&sql[i..i + 2], 16).unwrap())
        .collect()
}

#[test]
fn every_byte_value_round_trips() {
    // Each byte, escaped as a client library escapes it, inside a
    // literal that is invalid UTF-8 (so it is rewritten).
    for b in 0..=255u8 {
        let mut body = vec![0xFF];
        match b {
            0 => body.extend_from_slice(b"\\0"),
            b'\'' | b'\\' => body.extend_from_slice(&[b'\\', b]),
            _ => body.push(b),
        }
        let mut sql = b"SELECT _binary'".to_vec();
        sql.extend_from_slice(&body);
        sql.extend_from_slice(b"' AS v");
        let t = text(&sql);
        assert!(t.starts_with("SELECT X'"), "{t}");
        assert_eq!(hex_bytes(&t), vec![0xFF, b], "byte {b}");
        assert!(parse_statements(&t).is_ok(), "{t}");
    }
    // The whole range in one literal.
    let mut sql = b"INSERT INTO t VALUES ('".to_vec();
    for b in 0..=255u8 {
        match b {
            0 => sql.extend_from_slice(b"\\0"),
            b'\'' => sql.extend_from_slice(b"''"),
            b'\\' => sql.extend_from_slice(b"\\\\"),
            _ => sql.push(b),
        }
    }
    sql.extend_from_slice(b"')");
    let t = text(&sql);
    assert_eq!(hex_bytes(&t), (0..=255u8).collect::<Vec<_>>());
    assert!(t.starts_with("INSERT INTO t VALUES (X'"), "{t}");
}

#[test]
fn escapes_quotes_and_introducers() {
    assert_eq!(text(b"SELECT 'a\\'\x80'"), "SELECT X'612780'");
    assert_eq!(text(b"SELECT \"a\"\"\x80\""), "SELECT X'612280'");
    assert_eq!(text(b"SELECT _binary '\x80\\n\\%'"), "SELECT X'800A5C25'");
    assert_eq!(text(b"SELECT N'\x80', x'80'"), "SELECT X'80', x'80'");
    // Valid literals next to an invalid one are left alone.
    assert_eq!(
        text(b"SELECT 'caf\xc3\xa9', '\xe9'"),
        "SELECT 'caf\u{e9}', X'E9'"
    );
    // A valid text is not touched at all.
    assert!(matches!(
        from_bytes("SELECT 'é'".as_bytes()),
        Ok(std::borrow::Cow::Borrowed(_))
    ));
}

#[test]
fn quotes_inside_identifiers_and_comments_do_not_open_strings() {
    assert_eq!(
        text(b"SELECT `it's` FROM t /* don't */ WHERE a = '\xff' -- it's\n"),
        "SELECT `it's` FROM t /* don't */ WHERE a = X'FF' -- it's\n"
    );
    assert_eq!(
        text(b"SELECT 1 # \xff'\nFROM t"),
        "SELECT 1 # \u{fffd}'\nFROM t"
    );
    assert_eq!(text(b"SELECT 2-1, '\xff'"), "SELECT 2-1, X'FF'");
}

#[test]
fn invalid_utf8_outside_literals_is_a_syntax_error() {
    for bad in [
        &b"SELECT \xff"[..],
        b"SELECT `a\xff`",
        b"SELECT '\xff",
        b"\x80",
    ] {
        let e = from_bytes(bad).unwrap_err();
        assert_eq!(e.code.errno, 1064, "{bad:?}");
    }
}

fn literal(sql: &str) -> String {
    match &parse_statements(&format!("SELECT {sql}")).unwrap()[0] {
        Statement::Query(q) => match &*q.body {
            ast::SetExpr::Select(s) => match &s.projection[0] {
                ast::SelectItem::UnnamedExpr(ast::Expr::Value(
                    ast::Value::SingleQuotedString(v) | ast::Value::DoubleQuotedString(v),
                )) => v.clone(),
                other => panic!("{other:?}"),
            },
            other => panic!("{other:?}"),
        },
        other => panic!("{other:?}"),
    }
}

#[test]
fn mysql_escapes() {
    assert_eq!(literal(r"'al\_%'"), r"al\_%");
    assert_eq!(literal(r"'100\%'"), r"100\%");
    assert_eq!(literal(r"'a\\b'"), r"a\b");
    assert_eq!(literal(r"'it''s'"), "it's");
    assert_eq!(literal(r"'it\'s'"), "it's");
    assert_eq!(literal(r#""say ""hi""""#), r#"say "hi""#);
    assert_eq!(literal(r"'\n\t\0\x'"), "\n\t\0x");
    assert_eq!(literal("'é'"), "é");
}

#[test]
fn splits_at_top_level_semicolons() {
    assert_eq!(
        split_statements("SELECT 1; SELECT 2"),
        ["SELECT 1", " SELECT 2"]
    );
    assert_eq!(
        split_statements("SELECT ';' AS a;\n-- x;\nSELECT \"b;\", `c;`;"),
        ["SELECT ';' AS a", "\n-- x;\nSELECT \"b;\", `c;`"]
    );
    assert_eq!(
        split_statements("SELECT 'é';SELECT 2;;"),
        ["SELECT 'é'", "SELECT 2"]
    );
    assert_eq!(split_statements("SELECT 1"), ["SELECT 1"]);
}

#[test]
fn quoted_hex_literals_are_binary_strings() {
    let text = |sql: &str| -> String {
        tokenize(sql)
            .unwrap()
            .into_iter()
            .map(|t| t.token.to_string())
            .collect()
    };
    assert_eq!(text("SELECT X'41' + 0x41"), "SELECT _binary X'41' + X'41'");
    assert_eq!(text("SELECT\nx'00ff'"), "SELECT\n_binary X'00ff'");
    // Already introduced (also the text of a view read back).
    assert_eq!(text("SELECT _binary X'41'"), "SELECT _binary X'41'");
    assert_eq!(text("SELECT _utf8mb4 x'41'"), "SELECT _utf8mb4 X'41'");
    // Result columns are still named as the literal was written.
    let stmts = parse_statements("SELECT X'41' + 1, CONCAT(x'42', 'c')").unwrap();
    let [Statement::Query(q)] = stmts.as_slice() else {
        panic!("one query: {stmts:?}");
    };
    let ast::SetExpr::Select(sel) = q.body.as_ref() else {
        panic!("a SELECT");
    };
    let names: Vec<String> = sel
        .projection
        .iter()
        .map(|item| match item {
            ast::SelectItem::UnnamedExpr(e) => ladle_dataflow::expr_column_name(e),
            other => other.to_string(),
        })
        .collect();
    assert_eq!(names, ["X'41' + 1", "CONCAT(X'42', 'c')"]);
}

#[test]
fn versioned_comments_run_up_to_the_announced_version() {
    let open = |s| open_versioned_comments(s).into_owned();
    assert_eq!(open("/*!40101 SET NAMES utf8 */;"), "  SET NAMES utf8  ;");
    assert_eq!(open("SELECT 1 /*! + 1 */"), "SELECT 1   + 1  ");
    assert_eq!(open("/*!800341 SET a=1 */"), "/*!800341 SET a=1 */");
    assert_eq!(open("/*!90000 x */ SELECT 1"), "/*!90000 x */ SELECT 1");
    assert_eq!(open("/*M!100616 SET a=1 */"), "/*M!100616 SET a=1 */");
    assert_eq!(open("SELECT '/*!4 */', `/*!`"), "SELECT '/*!4 */', `/*!`");
    assert_eq!(
        open("SELECT 1 -- /*!40101 x */"),
        "SELECT 1 -- /*!40101 x */"
    );
    assert_eq!(open("/*!50503 SET @a='*/' */"), "  SET @a='*/'  ");
    assert_eq!(split_statements("SELECT 'open"), ["SELECT 'open"]);
}

/// The statement `sql` parses to, printed.
fn parsed(sql: &str) -> String {
    parse_statements(sql).expect("parses")[0].to_string()
}

#[test]
fn binary_operator_on_columns_and_parameters_is_a_cast() {
    assert_eq!(
        parsed("SELECT id FROM u WHERE name = BINARY t.name"),
        "SELECT id FROM u WHERE name = CAST(t.name AS BINARY)"
    );
    assert_eq!(
        parsed("SELECT id FROM u WHERE BINARY name = ? AND x = BINARY ?"),
        "SELECT id FROM u WHERE CAST(name AS BINARY) = ? AND x = CAST(? AS BINARY)"
    );
    // Literals, casts and column types are not touched.
    assert_eq!(
        parsed("SELECT BINARY 'a' = 'A', CAST(x AS BINARY)"),
        "SELECT BINARY 'a' = 'A', CAST(x AS BINARY)"
    );
    let create = "CREATE TABLE t (b BINARY(4), c BINARY NOT NULL, d BINARY)";
    assert!(!parsed(create).contains("CAST"));
    // Any operand: a function call, a parenthesized expression, a number.
    assert_eq!(
        parsed("SELECT BINARY LOWER(a) = 'x', BINARY (a || 'b'), 1 + BINARY 2"),
        "SELECT CAST(LOWER(a) AS BINARY) = 'x', CAST((a || 'b') AS BINARY), 1 + CAST(2 AS BINARY)"
    );
    assert_eq!(
        parsed("SELECT BINARY CONCAT(a, UPPER(b)) FROM t WHERE BINARY t.f(x) = 1"),
        "SELECT CAST(CONCAT(a, UPPER(b)) AS BINARY) FROM t WHERE CAST(t.f(x) AS BINARY) = 1"
    );
    assert!(!parsed("SELECT CONVERT(a, BINARY(4))").contains("CAST"));
}

#[test]
fn quoted_identifiers_undouble() {
    let stmts = parse_statements("SELECT `a``b` FROM t").unwrap();
    assert!(stmts[0].to_string().contains("`a``b`"), "{}", stmts[0]);
}

#[test]
fn display_safe_round_trips_backslashes() {
    let Statement::Query(q) = parse_statements(r"SELECT 1 WHERE 'x' LIKE 'al\_%'")
        .unwrap()
        .remove(0)
    else {
        panic!()
    };
    let text = display_safe(&q).to_string();
    let again = Parser::parse_sql(&MySqlDialect {}, &text).unwrap();
    assert_eq!(again[0].to_string(), Statement::Query(q).to_string());
}

/// The locking clauses of the one query `sql` parses to.
fn locking_clauses(sql: &str) -> Vec<String> {
    match parse(sql).unwrap().as_slice() {
        [Statement::Query(q)] => q.locks.iter().map(ToString::to_string).collect(),
        other => panic!("not one query: {other:?}"),
    }
}

#[test]
fn a_list_after_for_update_of_is_one_clause_per_table() {
    assert_eq!(
        locking_clauses(
            "SELECT * FROM a JOIN d.b ON a.x = b.x WHERE a.id = 1 FOR UPDATE OF a, d.b SKIP LOCKED"
        ),
        [
            "FOR UPDATE OF a SKIP LOCKED",
            "FOR UPDATE OF d.b SKIP LOCKED"
        ]
    );
    // One table, or none, parses as it is.
    assert_eq!(
        locking_clauses("SELECT * FROM a FOR SHARE OF a NOWAIT"),
        ["FOR SHARE OF a NOWAIT"]
    );
    assert_eq!(
        locking_clauses("SELECT * FROM a FOR UPDATE"),
        ["FOR UPDATE"]
    );
}
