"""End-to-end tests with real MySQL clients, each run against a spawned ladle
server and (when LADLE_TEST_MARIADB_URL is set) MariaDB, asserting the same
expected values on both (see conftest.py).

- PyMySQL: text protocol, client-side parameters, transactions, errors
- mysql-connector-python: server-side prepared statements (cursor(prepared=True))
- SQLAlchemy 2.x ORM: declarative models with a relationship, create_all,
  add/commit/query/join/update/delete, reflection via inspect()
- the `mariadb` command-line client
"""

import datetime
import decimal
import shutil
import subprocess

import mysql.connector
import pymysql
import pytest
from sqlalchemy import (ForeignKey, Integer, String, create_engine, func, inspect,
                        select)
from sqlalchemy.orm import (DeclarativeBase, Mapped, Session, mapped_column,
                            relationship)


# --------------------------------------------------------------------------
# PyMySQL (text protocol)
# --------------------------------------------------------------------------

def test_pymysql_crud(target):
    conn = target.connect_pymysql(autocommit=True)
    with conn.cursor() as c:
        c.execute(
            "CREATE TABLE users (id INT NOT NULL AUTO_INCREMENT PRIMARY KEY, "
            "name VARCHAR(50) NOT NULL, karma INT NOT NULL DEFAULT 0, "
            "bio VARCHAR(100), UNIQUE KEY users_name (name))")
        c.execute("INSERT INTO users (name, karma, bio) VALUES (%s, %s, %s)", ("alice", 10, "it's me"))
        assert c.lastrowid == 1
        c.executemany("INSERT INTO users (name, karma, bio) VALUES (%s, %s, %s)",
                      [("bob", 5, None), ("carol", 7, 'say "hi"'), ("dave", -1, "back\\slash")])
        c.execute("SELECT id, name, karma, bio FROM users WHERE karma > %s ORDER BY id", (0,))
        assert [d[0] for d in c.description] == ["id", "name", "karma", "bio"]
        assert c.fetchall() == ((1, "alice", 10, "it's me"), (2, "bob", 5, None), (3, "carol", 7, 'say "hi"'))
        c.execute("SELECT name FROM users WHERE name = %s", ("ALICE",))
        assert c.fetchall() == (("alice",),)
        c.execute("SELECT bio FROM users WHERE id = %s", (4,))
        assert c.fetchone() == ("back\\slash",)

        assert c.execute("UPDATE users SET karma = karma + 1 WHERE karma >= %s", (5,)) == 3
        c.execute("SELECT SUM(karma), COUNT(*) FROM users")
        assert c.fetchone() == (decimal.Decimal(24), 4)

        with pytest.raises(pymysql.err.IntegrityError) as e:
            c.execute("INSERT INTO users (name) VALUES (%s)", ("bob",))
        assert e.value.args[0] == 1062
        with pytest.raises(pymysql.err.ProgrammingError) as e:
            c.execute("SELECT * FROM no_such_table")
        assert e.value.args[0] == 1146

        assert c.execute("DELETE FROM users WHERE name IN (%s, %s)", ("bob", "dave")) == 2
        c.execute("SELECT name FROM users ORDER BY name")
        assert c.fetchall() == (("alice",), ("carol",))
    conn.close()


def test_pymysql_transactions(target):
    conn = target.connect_pymysql(autocommit=False)
    other = target.connect_pymysql(autocommit=True)
    with conn.cursor() as c, other.cursor() as o:
        c.execute("CREATE TABLE acct (id INT PRIMARY KEY, balance INT NOT NULL)")
        c.execute("INSERT INTO acct VALUES (1, 100), (2, 0)")
        conn.commit()
        c.execute("UPDATE acct SET balance = balance - 40 WHERE id = 1")
        c.execute("UPDATE acct SET balance = balance + 40 WHERE id = 2")
        c.execute("SELECT id, balance FROM acct ORDER BY id")
        assert c.fetchall() == ((1, 60), (2, 40))
        conn.rollback()
        c.execute("SELECT id, balance FROM acct ORDER BY id")
        assert c.fetchall() == ((1, 100), (2, 0))
        c.execute("UPDATE acct SET balance = 1 WHERE id = 2")
        conn.commit()
        o.execute("SELECT balance FROM acct WHERE id = 2")
        assert o.fetchone() == (1,)
    conn.close()
    other.close()


def test_pymysql_types(target):
    conn = target.connect_pymysql(autocommit=True)
    with conn.cursor() as c:
        c.execute(
            "CREATE TABLE t (id BIGINT PRIMARY KEY, price DECIMAL(10,2) NOT NULL, "
            "ratio DOUBLE, flag TINYINT(1), created DATETIME, day DATE, note TEXT)")
        c.execute("INSERT INTO t VALUES (%s, %s, %s, %s, %s, %s, %s)",
                  (9007199254740993, decimal.Decimal("12.34"), 0.5, True,
                   datetime.datetime(2024, 2, 29, 13, 45, 1), datetime.date(2024, 1, 2), "x" * 300))
        c.execute("SELECT id, price, ratio, flag, created, day, LENGTH(note) FROM t")
        assert c.fetchone() == (9007199254740993, decimal.Decimal("12.34"), 0.5, 1,
                                datetime.datetime(2024, 2, 29, 13, 45, 1), datetime.date(2024, 1, 2), 300)
    conn.close()


# --------------------------------------------------------------------------
# mysql-connector-python: server-side prepared statements (binary protocol)
# --------------------------------------------------------------------------

def test_pymysql_bytes_parameters_round_trip(target):
    # PyMySQL sends a bytes parameter as a _binary'...' literal holding the
    # raw bytes (not UTF-8): every byte must reach the column unchanged.
    conn = target.connect_pymysql(autocommit=True)
    every_byte = bytes(range(256))
    with conn.cursor() as c:
        c.execute("CREATE TABLE blobs (id INT PRIMARY KEY, v VARBINARY(300), b BLOB)")
        c.execute("INSERT INTO blobs VALUES (%s, %s, %s)", (1, b"\x80\xff\x00a'\\", every_byte))
        c.execute("SELECT v, b, LENGTH(b) FROM blobs WHERE id = %s", (1,))
        assert c.fetchone() == (b"\x80\xff\x00a'\\", every_byte, 256)
        c.execute("SELECT id FROM blobs WHERE v = %s", (b"\x80\xff\x00a'\\",))
        assert c.fetchall() == ((1,),)
    conn.close()


def _connector(target):
    return mysql.connector.connect(host=target.host, port=target.port, user=target.user,
                                   password=target.password, database=target.db,
                                   autocommit=True, connection_timeout=10)


def test_returning_both_protocols(target):
    """INSERT/DELETE ... RETURNING through the text protocol (PyMySQL) and
    server-side prepared statements (mysql-connector)."""
    text = target.connect_pymysql(autocommit=True)
    with text.cursor() as c:
        c.execute("CREATE TABLE t (id INT PRIMARY KEY AUTO_INCREMENT, s VARCHAR(10), n INT DEFAULT 3)")
        c.execute("INSERT INTO t (s) VALUES ('a'), ('b') RETURNING id, s, n")
        assert c.fetchall() == ((1, "a", 3), (2, "b", 3))
    conn = _connector(target)
    cur = conn.cursor(prepared=True)
    cur.execute("INSERT INTO t (s, n) VALUES (?, ?), (?, ?) RETURNING id, s, n * 2", ("c", 1, "d", 2))
    assert [tuple(r) for r in cur.fetchall()] == [(3, "c", 2), (4, "d", 4)]
    cur.execute("DELETE FROM t WHERE id > ? RETURNING s, id", (2,))
    assert sorted(tuple(r) for r in cur.fetchall()) == [("c", 3), ("d", 4)]
    cur.close()
    conn.close()
    with text.cursor() as c:
        c.execute("DELETE FROM t WHERE s = 'a' RETURNING id")
        assert c.fetchall() == ((1,),)
        c.execute("SELECT id, s FROM t")
        assert c.fetchall() == ((2, "b"),)
    text.close()


def test_connector_prepared_statements(target):
    conn = _connector(target)
    setup = conn.cursor()
    setup.execute("CREATE TABLE stories (id INT PRIMARY KEY AUTO_INCREMENT, user_id INT NOT NULL, "
                  "title VARCHAR(100) NOT NULL, score INT NOT NULL, url VARCHAR(200))")
    setup.close()
    cur = conn.cursor(prepared=True)
    insert = "INSERT INTO stories (user_id, title, score, url) VALUES (?, ?, ?, ?)"
    rows = [(1, "Rust 2.0", 10, "https://a"), (1, "SQL tips", 3, None), (2, "Ünïcode ☃", 7, "https://c"),
            (3, "zero", 0, None)]
    for r in rows:
        cur.execute(insert, r)
    assert cur.lastrowid == 4

    query = "SELECT id, title, score, url FROM stories WHERE user_id = ? ORDER BY score DESC"
    cur.execute(query, (1,))
    assert [tuple(r) for r in cur.fetchall()] == [(1, "Rust 2.0", 10, "https://a"), (2, "SQL tips", 3, None)]
    cur.execute(query, (2,))
    assert [tuple(r) for r in cur.fetchall()] == [(3, "Ünïcode ☃", 7, "https://c")]
    cur.execute(query, (99,))
    assert cur.fetchall() == []

    cur.execute("UPDATE stories SET score = score + ? WHERE id = ?", (5, 2))
    assert cur.rowcount == 1
    cur.execute(query, (1,))
    assert [tuple(r)[:3] for r in cur.fetchall()] == [(1, "Rust 2.0", 10), (2, "SQL tips", 8)]

    cur.execute("SELECT COUNT(*), SUM(score), MAX(title) FROM stories WHERE score >= ?", (5,))
    count, total, mx = cur.fetchone()
    assert (count, int(total), mx) == (3, 25, "Ünïcode ☃")

    cur.execute("SELECT title FROM stories WHERE title LIKE ? AND score BETWEEN ? AND ?", ("s%", 0, 100))
    assert sorted(r[0] for r in cur.fetchall()) == ["SQL tips"]

    cur.execute("DELETE FROM stories WHERE score < ?", (1,))
    assert cur.rowcount == 1
    with pytest.raises(mysql.connector.Error) as e:
        cur.execute("INSERT INTO stories (id, user_id, title, score) VALUES (?, ?, ?, ?)", (1, 1, "dup", 0))
    assert e.value.errno == 1062
    cur.execute("SELECT COUNT(*) FROM stories")
    assert cur.fetchone()[0] == 3
    cur.close()
    conn.close()


def test_connector_prepared_types(target):
    """Binary-protocol values both ways: NULL, negative, big, decimal, float,
    date and datetime parameters and result columns."""
    conn = _connector(target)
    setup = conn.cursor()
    setup.execute("CREATE TABLE v (id BIGINT PRIMARY KEY, n INT, price DECIMAL(10,2), ratio DOUBLE, "
                  "day DATE, at DATETIME, label VARCHAR(20))")
    setup.close()
    cur = conn.cursor(prepared=True)
    ins = "INSERT INTO v VALUES (?, ?, ?, ?, ?, ?, ?)"
    cur.execute(ins, (1, -5, decimal.Decimal("19.99"), 0.25, datetime.date(2024, 5, 17),
                      datetime.datetime(2024, 5, 17, 8, 30, 0), "x"))
    cur.execute(ins, (9007199254740993, None, None, None, None, None, None))
    cur.execute("SELECT id, n, price, ratio, day, at, label FROM v WHERE id = ?", (1,))
    assert tuple(cur.fetchone()) == (1, -5, decimal.Decimal("19.99"), 0.25, datetime.date(2024, 5, 17),
                                     datetime.datetime(2024, 5, 17, 8, 30, 0), "x")
    cur.execute("SELECT id, n, price, ratio, day, at, label FROM v WHERE id = ?", (9007199254740993,))
    assert tuple(cur.fetchone()) == (9007199254740993, None, None, None, None, None, None)
    cur.execute("SELECT id FROM v WHERE at >= ? ORDER BY id", (datetime.datetime(2024, 1, 1),))
    assert [r[0] for r in cur.fetchall()] == [1]
    cur.execute("SELECT COUNT(*) FROM v WHERE n IS NULL")
    assert cur.fetchone()[0] == 1
    cur.close()
    conn.close()


# --------------------------------------------------------------------------
# SQLAlchemy 2.x ORM
# --------------------------------------------------------------------------

class Base(DeclarativeBase):
    pass


class User(Base):
    __tablename__ = "users"
    id: Mapped[int] = mapped_column(Integer, primary_key=True, autoincrement=True)
    username: Mapped[str] = mapped_column(String(50), unique=True)
    karma: Mapped[int] = mapped_column(Integer, default=0)
    stories: Mapped[list["Story"]] = relationship(back_populates="user", cascade="all, delete-orphan")


class Story(Base):
    __tablename__ = "stories"
    id: Mapped[int] = mapped_column(Integer, primary_key=True, autoincrement=True)
    user_id: Mapped[int] = mapped_column(ForeignKey("users.id"), index=True)
    title: Mapped[str] = mapped_column(String(100))
    score: Mapped[int] = mapped_column(Integer, default=0)
    user: Mapped[User] = relationship(back_populates="stories")


def test_sqlalchemy_orm(target):
    url = f"mysql+pymysql://{target.user}:{target.password}@{target.host}:{target.port}/{target.db}"
    engine = create_engine(url)
    try:
        Base.metadata.create_all(engine)
        with Session(engine) as s:
            alice = User(username="alice", karma=5)
            bob = User(username="bob")
            alice.stories = [Story(title="Hello", score=3), Story(title="World", score=8)]
            bob.stories = [Story(title="Rust", score=5)]
            s.add_all([alice, bob])
            s.commit()
            assert alice.id is not None and bob.id is not None

        with Session(engine) as s:
            users = s.scalars(select(User).order_by(User.username)).all()
            assert [(u.username, u.karma) for u in users] == [("alice", 5), ("bob", 0)]
            assert sorted(st.title for st in users[0].stories) == ["Hello", "World"]

            rows = s.execute(
                select(User.username, Story.title).join(Story.user)
                .where(Story.score > 4).order_by(Story.score.desc())).all()
            assert [tuple(r) for r in rows] == [("alice", "World"), ("bob", "Rust")]

            counts = s.execute(
                select(User.username, func.count(Story.id)).join(User.stories)
                .group_by(User.username).order_by(User.username)).all()
            assert [tuple(r) for r in counts] == [("alice", 2), ("bob", 1)]

            top = s.scalars(select(Story).order_by(Story.score.desc(), Story.id).limit(2)).all()
            assert [st.title for st in top] == ["World", "Rust"]

            bob = s.scalars(select(User).where(User.username == "bob")).one()
            bob.karma = bob.karma + 10
            hello = s.scalars(select(Story).where(Story.title == "Hello")).one()
            s.delete(hello)
            s.commit()

        with Session(engine) as s:
            assert s.scalar(select(User.karma).where(User.username == "bob")) == 10
            assert sorted(s.scalars(select(Story.title)).all()) == ["Rust", "World"]
            s.delete(s.scalars(select(User).where(User.username == "bob")).one())
            s.commit()
            assert s.scalar(select(func.count()).select_from(Story)) == 1
            assert s.scalar(select(func.count()).select_from(User)) == 1

        insp = inspect(engine)
        assert sorted(insp.get_table_names()) == ["stories", "users"]
        cols = {c["name"]: c for c in insp.get_columns("stories")}
        assert list(cols) == ["id", "user_id", "title", "score"]
        assert cols["title"]["type"].length == 100
        assert cols["id"]["autoincrement"] is True
        assert insp.get_pk_constraint("users")["constrained_columns"] == ["id"]
        idx = {i["name"]: i for i in insp.get_indexes("stories")}
        assert any(i["column_names"] == ["user_id"] for i in idx.values())
        uidx = [i for i in insp.get_indexes("users") if i["column_names"] == ["username"]]
        assert len(uidx) == 1 and uidx[0]["unique"]
    finally:
        engine.dispose()


def test_sqlalchemy_core_mysqlconnector(target):
    """SQLAlchemy Core over the mysql-connector dialect: executemany insert,
    parameterized select, update and delete with rowcounts."""
    from sqlalchemy import Column, MetaData, Table, delete, insert, update

    url = f"mysql+mysqlconnector://{target.user}:{target.password}@{target.host}:{target.port}/{target.db}"
    engine = create_engine(url)
    try:
        md = MetaData()
        tags = Table("tags", md, Column("id", Integer, primary_key=True),
                     Column("tag", String(20), nullable=False, unique=True),
                     Column("hits", Integer, nullable=False, default=0))
        md.create_all(engine)
        with engine.begin() as c:
            c.execute(insert(tags), [{"tag": "rust", "hits": 3}, {"tag": "sql", "hits": 1},
                                     {"tag": "go", "hits": 0}])
        with engine.begin() as c:
            rows = c.execute(select(tags.c.tag, tags.c.hits).where(tags.c.hits >= 1)
                             .order_by(tags.c.hits.desc())).all()
            assert [tuple(r) for r in rows] == [("rust", 3), ("sql", 1)]
            assert c.execute(update(tags).where(tags.c.tag == "go").values(hits=tags.c.hits + 5)).rowcount == 1
            assert c.execute(delete(tags).where(tags.c.hits < 2)).rowcount == 1
        with engine.connect() as c:
            rows = c.execute(select(tags.c.tag).order_by(tags.c.tag)).scalars().all()
            assert rows == ["go", "rust"]
    finally:
        engine.dispose()


def test_pymysql_multi_statements_and_warnings(target):
    from pymysql.constants import CLIENT
    conn = target.connect_pymysql(autocommit=True, client_flag=CLIENT.MULTI_STATEMENTS)
    with conn.cursor() as c:
        c.execute("CREATE TABLE m (id INT PRIMARY KEY, v VARCHAR(10))")
        # One COM_QUERY, three results: rows, an OK, rows.
        c.execute("SELECT 1; INSERT INTO m VALUES (1, 'a;b'), (2, 'c'); SELECT id, v FROM m ORDER BY id")
        assert c.fetchall() == ((1,),)
        assert c.nextset()
        assert c.rowcount == 2
        assert c.nextset()
        assert c.fetchall() == ((1, "a;b"), (2, "c"))
        assert not c.nextset()
        # INSERT IGNORE reports each skipped duplicate as a warning.
        c.execute("INSERT IGNORE INTO m VALUES (1, 'x'), (3, 'y'), (3, 'z')")
        assert c.rowcount == 1
        assert conn.show_warnings() == (
            ("Warning", 1062, "Duplicate entry '1' for key 'PRIMARY'"),
            ("Warning", 1062, "Duplicate entry '3' for key 'PRIMARY'"),
        )
        c.execute("DROP TABLE IF EXISTS no_such_table")
        c.execute("SHOW WARNINGS")
        assert c.fetchall() == (("Note", 1051, f"Unknown table '{target.db}.no_such_table'"),)
    conn.close()


# --------------------------------------------------------------------------
# the mariadb command-line client
# --------------------------------------------------------------------------

def _cli(target, sql):
    exe = shutil.which("mariadb") or shutil.which("mysql")
    if exe is None:
        pytest.skip("no mariadb/mysql command-line client installed")
    proc = subprocess.run(
        [exe, "--no-defaults", "-h", target.host, "-P", str(target.port), "-u", target.user,
         "--batch", "-D", target.db, "-e", sql],
        capture_output=True, text=True, timeout=60, stdin=subprocess.DEVNULL)
    return proc


def test_mariadb_cli(target):
    p = _cli(target, "CREATE TABLE t (id INT PRIMARY KEY, name VARCHAR(20)); "
                     "INSERT INTO t VALUES (1, 'one'), (2, NULL), (3, 'three');")
    assert p.returncode == 0, p.stderr
    p = _cli(target, "SELECT id, name FROM t WHERE id >= 2 ORDER BY id")
    assert p.returncode == 0, p.stderr
    assert p.stdout == "id\tname\n2\tNULL\n3\tthree\n"
    p = _cli(target, "UPDATE t SET name = 'two' WHERE id = 2; SELECT COUNT(*) AS n FROM t WHERE name IS NOT NULL")
    assert p.returncode == 0, p.stderr
    assert p.stdout == "n\n3\n"
    p = _cli(target, "SELECT nope FROM t")
    assert p.returncode != 0
    assert "1054" in p.stderr


def test_explain_forms(target):
    """The EXPLAIN forms ORMs send (Django's QuerySet.explain(): FORMAT=TREE
    by default on MySQL 8, JSON, TRADITIONAL) are answered, not taken for
    a table name: JSON parses, TRADITIONAL has MySQL's leading columns."""
    import json
    conn = target.connect_pymysql(autocommit=True)
    with conn.cursor() as c:
        c.execute("CREATE TABLE ex (id INT PRIMARY KEY, v INT)")
        c.execute("INSERT INTO ex VALUES (1, 10), (2, 20)")
        q = "SELECT v FROM ex WHERE v > 5"
        c.execute("EXPLAIN FORMAT=JSON " + q)
        (doc,), = c.fetchall()
        assert [d[0] for d in c.description] == ["EXPLAIN"]
        assert "query_block" in json.loads(doc)
        for form in ("FORMAT=TRADITIONAL ", "EXTENDED ", ""):
            c.execute("EXPLAIN " + form + q)
            names = [d[0] for d in c.description]
            if target.name == "ladle" and form == "":
                assert names == ["GRAPH"]  # Ladle's own form
            else:
                assert names[:3] == ["id", "select_type", "table"], names
            assert len(c.fetchall()) >= 1
        if target.name == "ladle":
            # MySQL 8's form (MariaDB has none): one row of text.
            c.execute("EXPLAIN FORMAT=TREE " + q)
            (tree,), = c.fetchall()
            assert "Reader" in tree
        c.execute(q)
        assert c.fetchall() == ((10,), (20,))
    conn.close()
