#!/usr/bin/env bash
# Start a throw-away PostgreSQL server on loopback for the service tests (Debian's package).
# Source it: it exports CROWDBUDGET_POSTGRES_URL. Installs the package when missing.
set -euo pipefail
SUDO=""; [ "$(id -u)" -ne 0 ] && SUDO="sudo"
if ! ls /usr/lib/postgresql/*/bin/initdb >/dev/null 2>&1; then
    $SUDO apt-get update -q >/dev/null && $SUDO apt-get install -y -q postgresql >/dev/null
fi
PGBIN=$(ls -d /usr/lib/postgresql/*/bin | sort -V | tail -1)
# A free port unless one is given: a server left behind by an earlier run (same machine) must
# not make this one fail to bind.
PGPORT=${CROWDBUDGET_PGPORT:-$(python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')}
PGDATA=$(mktemp -d /tmp/crowdbudget-pg.XXXXXX)
RUNAS=()
if [ "$(id -u)" -eq 0 ]; then
    chown postgres "$PGDATA"
    RUNAS=(su postgres -s /bin/bash -c)
else
    RUNAS=(bash -c)
fi
"${RUNAS[@]}" "cd / && $PGBIN/initdb -D $PGDATA -A trust -U postgres >/dev/null"
"${RUNAS[@]}" "cd / && $PGBIN/pg_ctl -D $PGDATA -l $PGDATA/server.log -w -o '-p $PGPORT -k /tmp -c listen_addresses=127.0.0.1' start >/dev/null"
# Stop the server when the sourcing script exits, whatever the outcome.
trap '"${RUNAS[@]}" "cd / && $PGBIN/pg_ctl -D $PGDATA -m fast stop" >/dev/null 2>&1 || true' EXIT
export CROWDBUDGET_POSTGRES_URL="postgresql+psycopg://postgres@127.0.0.1:$PGPORT/postgres"
export CROWDBUDGET_REQUIRE_POSTGRES=1
echo "PostgreSQL on 127.0.0.1:$PGPORT (data $PGDATA)" >&2
