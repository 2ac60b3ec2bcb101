#!/bin/sh
# Temporal's databases on PostgreSQL: created and given their base schema on the first
# start, then brought up to this admin-tools version (a no-op when they already are).
set -eu
tool() { temporal-sql-tool --plugin postgres12 --ep postgresql -p 5432 "$@"; }
schemas=/etc/temporal/schema/postgresql/v12
for db in temporal:temporal temporal_visibility:visibility; do
  name="${db%%:*}" dir="${db##*:}"
  if tool --db "$name" create 2>/dev/null; then
    tool --db "$name" setup-schema -v 0.0
  fi
  tool --db "$name" update-schema -d "$schemas/$dir/versioned"
done
echo "temporal-schema: temporal and temporal_visibility are up to date"
