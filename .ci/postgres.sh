#!/usr/bin/env bash
# Start a local PostgreSQL for the storage tests. Idempotent: safe to run again and again.
#
#   eval "$(.ci/postgres.sh)"        # exports HERMES_TEST_POSTGRES_URL into the calling shell
#   /tmp/dev/bin/pytest tests/unit/test_storage.py -q
#
# Progress goes to stderr; the only thing on stdout is the `export ...` line, so `eval` is safe.
# Needs root (installs with apt-get when PostgreSQL is missing, then runs psql as the postgres user).
set -euo pipefail

PG_USER="${HERMES_PG_USER:-hermes}"
PG_PASSWORD="${HERMES_PG_PASSWORD:-hermes}"
PG_DB="${HERMES_PG_DB:-hermes_test}"
PG_PORT="${HERMES_PG_PORT:-5432}"

log() { echo "postgres.sh: $*" >&2; }

as_postgres() {  # run a shell command as the postgres user (from /, which it can always read)
    if [ "$(id -u)" = "0" ]; then
        su postgres -c "cd / && $1"
    else
        sudo -u postgres sh -c "cd / && $1"
    fi
}

# The client tools alone (psql) also create /usr/lib/postgresql/N: look for the server binary itself.
if ! command -v pg_ctlcluster >/dev/null 2>&1 || ! ls /usr/lib/postgresql/*/bin/postgres >/dev/null 2>&1; then
    log "installing PostgreSQL with apt-get"
    export DEBIAN_FRONTEND=noninteractive
    apt-get update >&2
    apt-get install -y postgresql >&2
fi

# The newest installed server version, e.g. 15.
PG_VERSION="$(ls -d /usr/lib/postgresql/*/bin/postgres 2>/dev/null | awk -F/ '{print $5}' | sort -V | tail -n1)"
if [ -z "${PG_VERSION}" ]; then
    log "no PostgreSQL server found under /usr/lib/postgresql"
    exit 1
fi

# A cluster for that version (the package creates `main`; create one when it is missing).
PG_CLUSTER="$(pg_lsclusters -h 2>/dev/null | awk -v v="${PG_VERSION}" '$1 == v {print $2; exit}')"
if [ -z "${PG_CLUSTER}" ]; then
    PG_CLUSTER=main
    log "creating cluster ${PG_VERSION}/${PG_CLUSTER}"
    pg_createcluster --port "${PG_PORT}" "${PG_VERSION}" "${PG_CLUSTER}" >&2
fi

STATUS="$(pg_lsclusters -h | awk -v v="${PG_VERSION}" -v c="${PG_CLUSTER}" '$1 == v && $2 == c {print $4}')"
ACTUAL_PORT="$(pg_lsclusters -h | awk -v v="${PG_VERSION}" -v c="${PG_CLUSTER}" '$1 == v && $2 == c {print $3}')"
PG_PORT="${ACTUAL_PORT:-${PG_PORT}}"
if [ "${STATUS}" != "online" ]; then
    log "starting cluster ${PG_VERSION}/${PG_CLUSTER} on port ${PG_PORT}"
    pg_ctlcluster "${PG_VERSION}" "${PG_CLUSTER}" start >&2
fi

# Wait until it accepts connections (up to ~30 s).
for _ in $(seq 1 60); do
    if pg_isready -q -h 127.0.0.1 -p "${PG_PORT}"; then
        break
    fi
    sleep 0.5
done
if ! pg_isready -q -h 127.0.0.1 -p "${PG_PORT}"; then
    log "server did not come up on 127.0.0.1:${PG_PORT}"
    exit 1
fi

PSQL="psql -v ON_ERROR_STOP=1 -p ${PG_PORT} -tAq"
if [ "$(as_postgres "${PSQL} -c \"SELECT 1 FROM pg_roles WHERE rolname = '${PG_USER}'\"")" != "1" ]; then
    log "creating role ${PG_USER}"
    as_postgres "${PSQL} -c \"CREATE ROLE ${PG_USER} LOGIN PASSWORD '${PG_PASSWORD}'\"" >&2
else
    as_postgres "${PSQL} -c \"ALTER ROLE ${PG_USER} LOGIN PASSWORD '${PG_PASSWORD}'\"" >&2
fi
if [ "$(as_postgres "${PSQL} -c \"SELECT 1 FROM pg_database WHERE datname = '${PG_DB}'\"")" != "1" ]; then
    log "creating database ${PG_DB}"
    as_postgres "${PSQL} -c \"CREATE DATABASE ${PG_DB} OWNER ${PG_USER}\"" >&2
fi

# Wait until the role can log in over TCP with its password (what the tests do).
for _ in $(seq 1 20); do
    if PGPASSWORD="${PG_PASSWORD}" psql -h 127.0.0.1 -p "${PG_PORT}" -U "${PG_USER}" -d "${PG_DB}" -tAqc "SELECT 1" >/dev/null 2>&1; then
        break
    fi
    sleep 0.5
done
if ! PGPASSWORD="${PG_PASSWORD}" psql -h 127.0.0.1 -p "${PG_PORT}" -U "${PG_USER}" -d "${PG_DB}" -tAqc "SELECT 1" >/dev/null 2>&1; then
    log "cannot log in as ${PG_USER} to ${PG_DB} on 127.0.0.1:${PG_PORT}"
    exit 1
fi

log "ready: ${PG_USER}@127.0.0.1:${PG_PORT}/${PG_DB} (PostgreSQL ${PG_VERSION})"
echo "export HERMES_TEST_POSTGRES_URL=postgresql+asyncpg://${PG_USER}:${PG_PASSWORD}@127.0.0.1:${PG_PORT}/${PG_DB}"
