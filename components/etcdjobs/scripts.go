package etcdjobs

// The snapshot and drill scripts run in the google-cloud-cli image with bash and
// coreutils only: that image puts python3 on PATH only on arm64. DefragScript runs in
// busybox's sh.

// SnapshotUploadScript uploads the checked snapshot as gs://<bucket>/<shard>/<UTC
// timestamp>.db. --no-clobber: a retry after an upload that did land must not try to
// overwrite it, which needs storage.objects.delete.
const SnapshotUploadScript = `set -euo pipefail
ts="$(date -u +%Y%m%dT%H%M%SZ)"
target="gs://${BUCKET}/${SHARD}/${ts}.db"
for attempt in 1 2 3 4 5; do
  # Workload Identity credentials can lag the pod start by a few seconds.
  if gcloud storage cp --no-clobber /backup/snapshot.db "${target}"; then exit 0; fi
  sleep 10
done
echo "upload of the ${SHARD} snapshot to ${target} failed" >&2
exit 1`

// FetchScript downloads the snapshot to restore: SNAPSHOT when it is set (it must be a
// snapshot of this shard: a snapshot of another shard would restore the wrong keyspace),
// otherwise the newest of the shard (the names are UTC timestamps, so they sort by time).
const FetchScript = `set -euo pipefail
prefix="gs://${BUCKET}/${SHARD}/"
if [ -n "${SNAPSHOT:-}" ]; then
  case "${SNAPSHOT}" in
    "${prefix}"*.db) chosen="${SNAPSHOT}" ;;
    *) echo "${SNAPSHOT} is not a snapshot of ${SHARD}: it must be ${prefix}<name>.db" >&2; exit 1 ;;
  esac
else
  if ! listing="$(gcloud storage ls "${prefix}")"; then
    echo "cannot list ${prefix}: no snapshot of ${SHARD} yet, or no read access" >&2
    exit 1
  fi
  chosen="$(printf '%s\n' "${listing}" | { grep '\.db$' || true; } | sort | tail -n 1)"
  if [ -z "${chosen}" ]; then echo "no snapshot of ${SHARD} in ${prefix}" >&2; exit 1; fi
fi
echo "restoring ${chosen}"
gcloud storage cp "${chosen}" /scratch/snapshot.db`

// SetAsideScript moves the member's data out of the way of the restore, on the same
// volume (a rename: nothing is copied or deleted). It refuses while an etcd still runs
// on that data: etcd holds an exclusive flock(2) on its database file while it has it
// open, and a member still running on the same node shares the file (a ReadWriteOnce
// volume keeps the pods of other nodes out already). A retry of the same restore finds its aside directory taken: what
// the data directory then holds is the failed attempt's partial restore, which it
// removes.
const SetAsideScript = `set -euo pipefail
db="${DATA_DIR}/member/snap/db"
if [ -e "${db}" ] && ! flock --nonblock --shared "${db}" true; then
  echo "an etcd is running on ${DATA_DIR} (${db} is locked): scale its StatefulSet to 0 first" >&2
  exit 1
fi
if [ -e "${ASIDE_DIR}" ]; then
  echo "${ASIDE_DIR} already holds the data from before this restore; removing the partial restore in ${DATA_DIR}"
  rm -rf "${DATA_DIR}"
elif [ -e "${DATA_DIR}" ]; then
  mv "${DATA_DIR}" "${ASIDE_DIR}"
  echo "moved ${DATA_DIR} aside to ${ASIDE_DIR}"
else
  echo "${DATA_DIR} does not exist: a new volume, nothing to move aside"
fi`

// DrillVerifyScript counts the keys the restored etcd serves through its JSON gateway,
// over bash's /dev/tcp (no python3 or curl needed). Key and range_end "\0" (AA==)
// select the whole keyspace; etcd leaves out a count of 0.
const DrillVerifyScript = `set -euo pipefail
body='{"key":"AA==","range_end":"AA==","count_only":true}'
ask() {
  exec 3<>/dev/tcp/127.0.0.1/2379
  printf 'POST /v3/kv/range HTTP/1.0\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\nContent-Length: %s\r\n\r\n%s' "${#body}" "${body}" >&3
  cat <&3
}
count=""
for attempt in $(seq 1 60); do
  if reply="$(ask 2>/dev/null)"; then
    case "${reply}" in
      "HTTP/1."?" 200"*)
        count="$(printf '%s' "${reply}" | { grep -o '"count":"[0-9]*"' || true; } | tr -dc 0-9)"
        count="${count:-0}"
        break ;;
    esac
  fi
  sleep 2
done
if [ -z "${count}" ]; then echo "the restored etcd never answered on 127.0.0.1:2379" >&2; exit 1; fi
if [ "${count}" -eq 0 ]; then echo "the restored snapshot serves no keys" >&2; exit 1; fi
echo "restore drill passed: ${count} keys served"`

// DefragScript defragments the members of one shard's etcd (ENDPOINTS, their client
// URLs; SHARD) through etcd's JSON gateway, with busybox's sh, wget and sed: the etcd
// image has no shell. A defragmentation blocks its member while it rewrites the database
// file, so the members go one at a time, each only once the one before serves again, and
// the leader last, which costs one leader election at most. When any member is not
// healthy, none is defragmented: blocking a second member could cost the quorum. NOSPACE
// is left out of the health check, as that alarm is what a defragmentation clears the
// way for. wget's own -T is not used: busybox 1.35's wget crashes with it; timeout(1)
// bounds each call instead.
const DefragScript = `set -eu
call() {
  if [ "$#" -gt 2 ]; then
    timeout "$2" wget -q -O - --header 'Content-Type: application/json' --post-data "$3" "$1"
  else
    timeout "$2" wget -q -O - "$1"
  fi
}
# The gateway writes 64-bit numbers as strings.
field() { printf '%s' "$2" | sed -n "s/.*\"$1\":\"\([0-9]*\)\".*/\1/p"; }
healthy() { call "$1/health?exclude=NOSPACE" 10 2>/dev/null | grep -q '"health":"true"'; }
status() { call "$1/v3/maintenance/status" 30 '{}'; }

leader=""
followers=""
for ep in ${ENDPOINTS}; do
  if ! healthy "${ep}" || ! s="$(status "${ep}" 2>/dev/null)"; then
    echo "skipped: member ${ep} of ${SHARD}'s etcd is not healthy, so no member is defragmented (a defragmentation blocks its member, and the others must keep the quorum)" >&2
    exit 1
  fi
  if [ "$(field leader "${s}")" = "$(field member_id "${s}")" ]; then
    leader="${ep}"
  else
    followers="${followers} ${ep}"
  fi
done
if [ -z "${leader}" ]; then
  echo "skipped: no member of ${SHARD}'s etcd is its leader, so no member is defragmented" >&2
  exit 1
fi
done_count=0
for ep in ${followers} ${leader}; do
  role=follower
  if [ "${ep}" = "${leader}" ]; then role=leader; fi
  before="$(status "${ep}")"
  call "${ep}/v3/maintenance/defragment" 900 '{}' >/dev/null
  after="$(status "${ep}")"
  echo "defragmented ${ep} (${role}): database size $(field dbSize "${before}") -> $(field dbSize "${after}") bytes, $(field dbSizeInUse "${after}") bytes in use"
  done_count=$((done_count + 1))
  waited=0
  until healthy "${ep}"; do
    waited=$((waited + 1))
    if [ "${waited}" -ge 60 ]; then
      echo "${ep} is not healthy 60s after its defragmentation: the members after it are left as they are" >&2
      exit 1
    fi
    sleep 1
  done
done
echo "defragmented ${done_count} members of ${SHARD}'s etcd, the leader last"`
