// Go's database/sql with go-sql-driver/mysql against Ladle and MariaDB:
// the driver prepares and closes a statement for every parameterized
// query (COM_STMT_PREPARE, COM_STMT_EXECUTE, COM_STMT_CLOSE, the close
// pipelined with the next command), pools connections, and types values
// from the column metadata. Usage: clients DSN [DSN...]; each DSN is
// checked in turn and the program exits non-zero on the first failure.
package main

import (
	"database/sql"
	"fmt"
	"os"
	"strings"
	"sync"

	_ "github.com/go-sql-driver/mysql"
)

func check(dsn string) error {
	db, err := sql.Open("mysql", dsn)
	if err != nil {
		return err
	}
	defer db.Close()
	db.SetMaxOpenConns(4)
	stmts := []string{
		"DROP DATABASE IF EXISTS go_clients",
		"CREATE DATABASE go_clients",
		"CREATE TABLE go_clients.t (id INT PRIMARY KEY, name VARCHAR(20), score DECIMAL(10,2), at TIME, raw VARBINARY(8))",
	}
	for _, s := range stmts {
		if _, err := db.Exec(s); err != nil {
			return fmt.Errorf("%s: %w", s, err)
		}
	}
	for i := 0; i < 50; i++ {
		if _, err := db.Exec("INSERT INTO go_clients.t VALUES (?, ?, ?, ?, ?)",
			i, fmt.Sprintf("n%d", i), fmt.Sprintf("%d.25", i), "12:34:56", []byte{0x80, byte(i), 0xff}); err != nil {
			return fmt.Errorf("insert %d: %w", i, err)
		}
	}
	// Parameterized reads from several goroutines over the pool: each
	// is a prepare + execute + close on some pooled connection.
	var wg sync.WaitGroup
	errs := make(chan error, 8)
	for g := 0; g < 4; g++ {
		wg.Add(1)
		go func(g int) {
			defer wg.Done()
			for i := 0; i < 100; i++ {
				id := (g*100 + i) % 50
				var name, score, at string
				var raw []byte
				err := db.QueryRow("SELECT name, score, at, raw FROM go_clients.t WHERE id = ?", id).
					Scan(&name, &score, &at, &raw)
				if err != nil {
					errs <- fmt.Errorf("read %d: %w", id, err)
					return
				}
				want := fmt.Sprintf("n%d %d.25 12:34:56 80%02xff", id, id, id)
				got := fmt.Sprintf("%s %s %s %x", name, score, at, raw)
				if got != want {
					errs <- fmt.Errorf("read %d: got %q, want %q", id, got, want)
					return
				}
			}
		}(g)
	}
	wg.Wait()
	close(errs)
	for e := range errs {
		return e
	}
	var n int
	if err := db.QueryRow("SELECT COUNT(*) FROM go_clients.t WHERE id < ?", 10).Scan(&n); err != nil || n != 10 {
		return fmt.Errorf("count: %v %d", err, n)
	}
	_, err = db.Exec("DROP DATABASE go_clients")
	return err
}

func main() {
	for _, dsn := range os.Args[1:] {
		if err := check(dsn); err != nil {
			fmt.Printf("FAIL %s: %v\n", strings.SplitN(dsn, "@", 2)[1], err)
			os.Exit(1)
		}
		fmt.Printf("ok %s\n", strings.SplitN(dsn, "@", 2)[1])
	}
}
