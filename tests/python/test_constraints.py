"""Constraints as ORMs reflect them, compared with MariaDB: SHOW CREATE
TABLE lines for FOREIGN KEY and CHECK constraints, and SQLAlchemy's
inspector (which parses SHOW CREATE TABLE) finding the foreign keys."""

from sqlalchemy import create_engine, inspect


def test_show_create_table_constraints(target):
    conn = target.connect_pymysql(autocommit=True)
    with conn.cursor() as c:
        c.execute("CREATE TABLE p (id INT PRIMARY KEY)")
        c.execute("CREATE TABLE ch (id INT PRIMARY KEY, pid INT, n INT, "
                  "CONSTRAINT ch_p FOREIGN KEY (pid) REFERENCES p (id) ON DELETE CASCADE, "
                  "CONSTRAINT positive CHECK (n > 0))")
        c.execute("SHOW CREATE TABLE ch")
        text = c.fetchone()[1]
    lines = [l.strip().rstrip(",") for l in text.splitlines()]
    assert "CONSTRAINT `ch_p` FOREIGN KEY (`pid`) REFERENCES `p` (`id`) ON DELETE CASCADE" in lines
    assert any(l.startswith("CONSTRAINT `positive` CHECK (") for l in lines)
    assert "KEY `ch_p` (`pid`)" in lines

    url = f"mysql+pymysql://{target.user}:{target.password}@{target.host}:{target.port}/{target.db}"
    engine = create_engine(url)
    try:
        fks = inspect(engine).get_foreign_keys("ch")
    finally:
        engine.dispose()
    assert [(f["name"], f["constrained_columns"], f["referred_table"], f["referred_columns"],
             f["options"].get("ondelete")) for f in fks] == [("ch_p", ["pid"], "p", ["id"], "CASCADE")]


def _error_code(fn):
    try:
        fn()
    except Exception as e:  # noqa: BLE001 - the driver's error carries the code
        return e.args[0]
    return None


def test_foreign_keys_hold_across_commit(target):
    """A FOREIGN KEY checked at the statement can be broken by another
    connection before COMMIT. InnoDB prevents it with row locks: the other
    connection waits (here, with a 1 s lock wait timeout, fails with 1205)
    and the COMMIT succeeds. Ladle takes no row locks: the other connection
    succeeds and the COMMIT fails with the key's error (1452 / 1451),
    applying nothing of the transaction. Either way no orphan is left."""
    a = target.connect_pymysql(autocommit=True)
    b = target.connect_pymysql(autocommit=True)
    with a.cursor() as x, b.cursor() as y:
        x.execute("CREATE TABLE p (id INT PRIMARY KEY)")
        x.execute("CREATE TABLE ch (id INT PRIMARY KEY, pid INT, FOREIGN KEY (pid) REFERENCES p (id))")
        x.execute("CREATE TABLE log (n INT)")
        x.execute("INSERT INTO p VALUES (1), (2)")
        x.execute("SET SESSION TRANSACTION ISOLATION LEVEL READ COMMITTED")
        if target.name == "mariadb":
            y.execute("SET SESSION innodb_lock_wait_timeout = 1")

        # A child inserted, its parent deleted by B before A commits.
        x.execute("BEGIN")
        x.execute("INSERT INTO log VALUES (1)")
        x.execute("INSERT INTO ch VALUES (10, 1)")
        b_delete = _error_code(lambda: y.execute("DELETE FROM p WHERE id = 1"))
        commit = _error_code(a.commit)
        if target.name == "mariadb":
            assert (b_delete, commit) == (1205, None)
        else:
            assert (b_delete, commit) == (None, 1452)
            x.execute("SELECT COUNT(*) FROM log")
            assert x.fetchone() == (0,)

        # A parent deleted, a child of it added by B before A commits.
        x.execute("BEGIN")
        x.execute("DELETE FROM p WHERE id = 2")
        b_insert = _error_code(lambda: y.execute("INSERT INTO ch VALUES (20, 2)"))
        commit = _error_code(a.commit)
        if target.name == "mariadb":
            assert (b_insert, commit) == (1205, None)
        else:
            assert (b_insert, commit) == (None, 1451)
            x.execute("SELECT id FROM p ORDER BY id")
            assert x.fetchall() == ((2,),)

        # Whatever happened, every child has its parent.
        x.execute("SELECT COUNT(*) FROM ch LEFT JOIN p ON p.id = ch.pid WHERE p.id IS NULL")
        assert x.fetchone() == (0,)
        # Without a conflict, the same transactions commit.
        x.execute("BEGIN")
        x.execute("INSERT INTO p VALUES (3)")
        x.execute("INSERT INTO ch VALUES (30, 3)")
        a.commit()
        x.execute("SELECT pid FROM ch WHERE id = 30")
        assert x.fetchone() == (3,)
    a.close()
    b.close()
