module github.com/oxios/oxios/tests/bench/fts5

go 1.23

require github.com/mattn/go-sqlite3 v1.14.53
