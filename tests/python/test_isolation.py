"""Which isolation level a transaction gets, with autocommit on and off:
SET TRANSACTION (the next transaction only), SET SESSION TRANSACTION,
BEGIN and START TRANSACTION WITH CONSISTENT SNAPSHOT, each probed by
whether a read repeats after another connection's commit. Same answers on
Ladle and MariaDB."""


def test_isolation_level_of_each_transaction(target):
    a = target.connect_pymysql(autocommit=True)
    b = target.connect_pymysql(autocommit=True)
    x, y = a.cursor(), b.cursor()
    x.execute("CREATE TABLE t (id INT PRIMARY KEY, v INT)")
    x.execute("INSERT INTO t VALUES (1, 1)")

    def level():
        x.execute("SELECT v FROM t")
        first = x.fetchall()
        y.execute("UPDATE t SET v = v + 1")
        x.execute("SELECT v FROM t")
        second = x.fetchall()
        x.execute("COMMIT")
        return "RR" if first == second else "RC"

    seen = []
    x.execute("SET SESSION TRANSACTION ISOLATION LEVEL READ COMMITTED")
    x.execute("SET autocommit = 0")
    x.execute("SET TRANSACTION ISOLATION LEVEL REPEATABLE READ")
    seen.append(level())  # the implicit transaction is the next one
    seen.append(level())  # and only that one
    x.execute("SET TRANSACTION ISOLATION LEVEL REPEATABLE READ")
    x.execute("BEGIN")
    seen.append(level())
    seen.append(level())
    x.execute("SET SESSION TRANSACTION ISOLATION LEVEL REPEATABLE READ")
    seen.append(level())
    x.execute("SET SESSION TRANSACTION ISOLATION LEVEL READ COMMITTED")
    x.execute("BEGIN")
    seen.append(level())
    x.execute("SET autocommit = 1")
    x.execute("SET TRANSACTION ISOLATION LEVEL REPEATABLE READ")
    x.execute("START TRANSACTION WITH CONSISTENT SNAPSHOT")
    seen.append(level())
    x.execute("BEGIN")
    seen.append(level())
    assert seen == ["RR", "RC", "RR", "RC", "RR", "RC", "RR", "RC"]
    a.close()
    b.close()
