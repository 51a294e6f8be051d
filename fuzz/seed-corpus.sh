#!/usr/bin/env bash
# Writes the fuzz targets' seed corpora from the sqllogictest files: every
# statement and query of tests/sql (deduplicated, at most LIMIT of them,
# spread over the files) for sql_frontend, and the same texts as
# COM_QUERY / COM_STMT_PREPARE packets, plus a few other commands, for
# wire_commands. Run from anywhere; rewrites fuzz/corpus/*/seed-*.
set -euo pipefail
cd "$(dirname "$0")"
LIMIT="${LIMIT:-400}"
sql_dir=corpus/sql_frontend
wire_dir=corpus/wire_commands
mkdir -p "$sql_dir" "$wire_dir"
rm -f "$sql_dir"/seed-* "$wire_dir"/seed-*
# One record per statement: the lines after `statement ...` or `query ...`
# up to a blank line or `----`, joined by newlines, NUL-terminated.
statements() {
  for f in $(find ../tests/sql -name '*.test' | sort); do
    awk '
      /^(statement|query) / { inside = 1; text = ""; next }
      inside && (/^----/ || /^$/) { if (text != "") printf "%s%c", text, 0; inside = 0; next }
      inside { text = (text == "" ? $0 : text "\n" $0) }
      END { if (inside && text != "") printf "%s%c", text, 0 }
    ' "$f"
  done
}
total=$(statements | tr -cd '\0' | wc -c)
step=$(( total / LIMIT )); (( step >= 1 )) || step=1
n=0; i=0
while IFS= read -r -d '' sql; do
  i=$(( i + 1 ))
  (( i % step == 0 )) || continue
  name=$(printf '%s' "$sql" | sha1sum | cut -c1-16)
  printf '%s' "$sql" > "$sql_dir/seed-$name"
  # COM_QUERY, and every fourth one also as COM_STMT_PREPARE then
  # COM_STMT_EXECUTE of statement 1 with no parameters (0xFF 0xFE splits).
  if (( n % 4 == 0 )); then
    { printf '\x16%s' "$sql"; printf '\xff\xfe\x17\x01\x00\x00\x00\x00\x01\x00\x00\x00'; } > "$wire_dir/seed-$name"
  else
    printf '\x03%s' "$sql" > "$wire_dir/seed-$name"
  fi
  n=$(( n + 1 ))
done < <(statements)
# Other commands: COM_PING, COM_INIT_DB, COM_FIELD_LIST, COM_STATISTICS,
# COM_SET_OPTION, COM_RESET_CONNECTION, a prepared statement with a
# parameter executed with an INT, COM_STMT_SEND_LONG_DATA, COM_STMT_RESET,
# COM_STMT_CLOSE, COM_CHANGE_USER.
printf '\x0e' > "$wire_dir/seed-ping"
printf '\x02fz' > "$wire_dir/seed-init-db"
printf '\x04t\x00' > "$wire_dir/seed-field-list"
printf '\x09' > "$wire_dir/seed-statistics"
printf '\x1b\x00\x00' > "$wire_dir/seed-set-option"
printf '\x1f\xff\xfe\x03SELECT 1' > "$wire_dir/seed-reset-connection"
printf '\x16SELECT a FROM t WHERE id = ?\xff\xfe\x17\x01\x00\x00\x00\x00\x01\x00\x00\x00\x00\x01\x03\x00\x02\x00\x00\x00' > "$wire_dir/seed-execute-int"
printf '\x16SELECT ?\xff\xfe\x18\x01\x00\x00\x00\x00\x00abc\xff\xfe\x17\x01\x00\x00\x00\x00\x01\x00\x00\x00\x00\x01\xfe\x00\xff\xfe\x1a\x01\x00\x00\x00\xff\xfe\x19\x01\x00\x00\x00' > "$wire_dir/seed-long-data"
printf '\x11root\x00\x00fz\x00' > "$wire_dir/seed-change-user"
printf '\xff\xfd\x05\x00\x00\x00\x03SELECT\x01\x00\x00\x01\x0e' > "$wire_dir/seed-raw-frames"
echo "$n statements seeded from $total"
