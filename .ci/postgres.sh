# A throwaway PostgreSQL cluster on 127.0.0.1 for the PostgreSQL store tests.
#
# Source this file, then call `caap_pg_start`: it installs Debian's `postgresql` package when no
# server binaries are found, initdbs a cluster under a fresh temp dir, starts it on a free port
# bound to 127.0.0.1 only, creates a `caap` database and exports CAAP_TEST_POSTGRES_DSN. It also
# installs an EXIT trap that stops the server and removes the directory, so the cluster goes away
# even when the tests fail. `caap_pg_stop` does the same by hand.
#
# Works as root (the server runs as the `postgres` user, which initdb requires) and as an
# ordinary user (the server runs as that user).

caap_pg_bindir() {
  local d
  d=$(ls -d /usr/lib/postgresql/*/bin 2>/dev/null | sort -V | tail -n 1 || true)
  if [ -n "$d" ] && [ -x "$d/initdb" ]; then
    echo "$d"
  elif command -v initdb >/dev/null 2>&1; then
    dirname "$(command -v initdb)"
  fi
}

caap_pg_as() {
  # Run a server command as the cluster owner.
  if [ "$(id -u)" = 0 ]; then
    runuser -u postgres -- "$@"
  else
    "$@"
  fi
}

caap_pg_start() {
  local bin port
  bin=$(caap_pg_bindir)
  if [ -z "$bin" ]; then
    (apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq postgresql \
      >/dev/null) || { echo "postgresql could not be installed; its store tests will skip"; return 0; }
    bin=$(caap_pg_bindir)
  fi
  CAAP_PG_DIR=$(mktemp -d /tmp/caap-pg.XXXXXX)
  if [ "$(id -u)" = 0 ]; then chown postgres: "$CAAP_PG_DIR"; fi
  CAAP_PG_BIN=$bin
  port=$(python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')
  trap caap_pg_stop EXIT
  caap_pg_as "$bin/initdb" -D "$CAAP_PG_DIR/data" -U caap --auth=trust -E UTF8 --no-locale \
    >"$CAAP_PG_DIR/initdb.log" 2>&1 || { cat "$CAAP_PG_DIR/initdb.log"; return 1; }
  caap_pg_as "$bin/pg_ctl" -D "$CAAP_PG_DIR/data" -l "$CAAP_PG_DIR/server.log" -w -t 60 \
    -o "-c listen_addresses=127.0.0.1 -p $port -k $CAAP_PG_DIR -c max_connections=200" \
    start >/dev/null || { cat "$CAAP_PG_DIR/server.log"; return 1; }
  "$bin/createdb" -h 127.0.0.1 -p "$port" -U caap caap
  export CAAP_TEST_POSTGRES_DSN="postgresql://caap@127.0.0.1:$port/caap"
  echo "PostgreSQL $("$bin/postgres" --version | awk '{print $3}') on 127.0.0.1:$port"
}

caap_pg_stop() {
  if [ -n "${CAAP_PG_DIR:-}" ] && [ -d "$CAAP_PG_DIR" ]; then
    caap_pg_as "$CAAP_PG_BIN/pg_ctl" -D "$CAAP_PG_DIR/data" -m fast -w stop >/dev/null 2>&1 || true
    rm -rf "$CAAP_PG_DIR"
  fi
  CAAP_PG_DIR=
  unset CAAP_TEST_POSTGRES_DSN
}
