"""The insert id of the OK packet (cursor.lastrowid, mysql_insert_id()) and
LAST_INSERT_ID(), compared with MariaDB: Django and Rails set a new object's
primary key from the former, so a wrong value silently mis-keys objects.

Rules (MySQL's sql_insert.cc): the OK packet carries the first value the
statement generated for a row it wrote; without one, the AUTO_INCREMENT
value of the last row it inserted, replaced or updated (an explicit id, or
the id of the row ON DUPLICATE KEY UPDATE changed); else 0.
LAST_INSERT_ID() changes only when a value was generated for a written row.
"""


def last_insert_id(conn):
    with conn.cursor() as c:
        c.execute("SELECT LAST_INSERT_ID()")
        return c.fetchone()[0]


def test_insert_ids(target):
    conn = target.connect_pymysql(autocommit=True)
    with conn.cursor() as c:
        c.execute("CREATE TABLE t (id INT AUTO_INCREMENT PRIMARY KEY, v VARCHAR(10), UNIQUE KEY uv (v))")
        steps = [
            # (statement, affected rows, insert id, LAST_INSERT_ID())
            ("INSERT INTO t (id, v) VALUES (7, 'b')", 1, 7, 0),
            ("INSERT INTO t (id, v) VALUES (10, 'c'), (12, 'd')", 2, 12, 0),
            ("INSERT INTO t (v) VALUES ('e'), ('f')", 2, 13, 13),
            ("INSERT INTO t (id, v) VALUES (NULL, 'g'), (30, 'h')", 2, 15, 15),
            ("INSERT INTO t (id, v) VALUES (40, 'i'), (NULL, 'j')", 2, 41, 41),
            ("INSERT INTO t (v) VALUES ('b') ON DUPLICATE KEY UPDATE v = 'bb'", 2, 7, 41),
            ("INSERT IGNORE INTO t (v) VALUES ('c')", 0, 0, 41),
            ("REPLACE INTO t (id, v) VALUES (50, 'd')", 2, 50, 41),
            ("UPDATE t SET v = 'dd' WHERE id = 50", 1, 0, 41),
        ]
        for sql, affected, insert_id, lid in steps:
            assert (c.execute(sql), c.lastrowid, last_insert_id(conn)) == (affected, insert_id, lid), sql


def test_insert_ids_in_transaction(target):
    conn = target.connect_pymysql(autocommit=True)
    with conn.cursor() as c:
        c.execute("CREATE TABLE t (id INT AUTO_INCREMENT PRIMARY KEY, v VARCHAR(10), UNIQUE KEY uv (v))")
        c.execute("INSERT INTO t (v) VALUES ('a')")
        c.execute("BEGIN")
        assert (c.execute("INSERT INTO t (id, v) VALUES (60, 'm')"), c.lastrowid) == (1, 60)
        # The explicit 60 moved the counter at once, not at COMMIT.
        assert (c.execute("INSERT INTO t (v) VALUES ('n')"), c.lastrowid) == (1, 61)
        assert last_insert_id(conn) == 61
        assert (c.execute("INSERT IGNORE INTO t (v) VALUES ('a')"), c.lastrowid) == (0, 0)
        assert (c.execute("INSERT INTO t (v) VALUES ('a') ON DUPLICATE KEY UPDATE v = 'aa'"),
                c.lastrowid) == (2, 1)
        c.execute("COMMIT")
        c.execute("SELECT id, v FROM t ORDER BY id")
        assert c.fetchall() == ((1, "aa"), (60, "m"), (61, "n"))


def test_found_rows_flag(target):
    """With CLIENT_FOUND_ROWS (Django sets it), UPDATE and ON DUPLICATE KEY
    UPDATE report the rows they found, not only those they changed: Django's
    save() treats 0 as "no such row" and INSERTs a duplicate."""
    from pymysql.constants import CLIENT
    conn = target.connect_pymysql(autocommit=True, client_flag=CLIENT.FOUND_ROWS)
    plain = target.connect_pymysql(autocommit=True)
    with conn.cursor() as c, plain.cursor() as p:
        c.execute("CREATE TABLE t (id INT PRIMARY KEY, v INT)")
        c.execute("INSERT INTO t VALUES (1, 1), (2, 2)")
        assert c.execute("UPDATE t SET v = 1 WHERE id = 1") == 1
        assert c.execute("UPDATE t SET v = 1") == 2
        assert c.execute("INSERT INTO t VALUES (1, 1) ON DUPLICATE KEY UPDATE v = 1") == 1
        assert p.execute("UPDATE t SET v = 1") == 0
        assert p.execute("INSERT INTO t VALUES (1, 1) ON DUPLICATE KEY UPDATE v = 1") == 0
        c.execute("BEGIN")
        assert c.execute("UPDATE t SET v = 1 WHERE id = 1") == 1
        assert c.execute("INSERT INTO t VALUES (1, 1) ON DUPLICATE KEY UPDATE v = 1") == 1
        assert c.execute("INSERT INTO t VALUES (1, 1) ON DUPLICATE KEY UPDATE v = 5") == 2
        c.execute("COMMIT")
        p.execute("BEGIN")
        assert p.execute("UPDATE t SET v = 5") == 1
        assert p.execute("UPDATE t SET v = 6") == 2
        assert p.execute("INSERT INTO t VALUES (1, 1) ON DUPLICATE KEY UPDATE v = 6") == 0
        p.execute("COMMIT")
