#!/usr/bin/env bash
# Fail (or restore) one log directory of a running Kafka broker of the compose stack.
#
# usage: docker/fail-dir.sh [--restore] BROKER DIR
#   BROKER  compose service name of a broker (e.g. kafka39, kafka44b); its cluster's compose file
#   DIR     d1, d2, ... or a full path; must be one of the broker's log.dirs
#
# What Kafka reacts to: a broker takes a log dir offline only when an I/O operation in it
# throws an IOException and the LogDirFailureChannel is told about it. Nothing watches the
# directory itself, and files Kafka already has open keep working, so removing a directory
# or its permissions is only noticed at the next operation that opens or renames a file:
# a segment roll, creating a partition, or, for every live dir and without any traffic,
# the periodic rewrite of the recovery-point and log-start-offset checkpoints
# (log.flush.offset.checkpoint.interval.ms and log.flush.start.offset.checkpoint.interval.ms,
# 5 s in our server.properties, 60 s by default), which writes a .tmp file and renames it.
#
# So this script, as root inside the container:
#   1. replaces each checkpoint file with a non-empty directory of the same name, so the
#      rename over it fails even for a Kafka running as root (root ignores permissions);
#   2. chmod 000 the directory, so the non-root Kafka of the apache/kafka image gets
#      "permission denied" on any new file in it.
# Within a few seconds the broker logs the dir as offline, reports it in BrokerHeartbeat
# OfflineLogDirs (KIP-858), and the controller moves leadership away from its replicas.
# If the failed dir holds the metadata log (d1 here: metadata.log.dir defaults to the first
# log.dirs entry), Kafka halts the whole broker instead.
#
# --restore undoes both steps. Kafka never brings an offline dir back by itself: restart the
# broker afterwards (docker compose restart BROKER). Checkpoint contents are lost; Kafka then
# recovers those logs from their segments on startup.
set -euo pipefail

here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)

restore=0
if [[ "${1:-}" == "--restore" ]]; then
    restore=1
    shift
fi
if [[ $# -ne 2 ]]; then
    sed -n '2,6p' "$0" | sed 's/^# \{0,1\}//' >&2
    exit 2
fi
broker=$1
dir=$2
if [[ "$dir" != /* ]]; then
    dir="/var/lib/kafka/$dir"
fi
# Broker names are unique across clusters (render.py checks), so the broker's rendered
# properties file names its cluster: generated/CLUSTER/BROKER.properties.
if [[ -z "${COMPOSE_FILE:-}" ]]; then
    shopt -s nullglob
    found=("$here"/generated/*/"$broker".properties)
    if [[ ${#found[@]} -ne 1 ]]; then
        echo "fail-dir.sh: no broker named $broker in docker/generated/*/ (see docker/settings.ini)" >&2
        exit 2
    fi
    cluster=$(basename "$(dirname "${found[0]}")")
    COMPOSE_FILE="$here/compose-$cluster.yaml"
fi
compose_file=$COMPOSE_FILE
if ! docker compose version >/dev/null 2>&1; then
    echo "fail-dir.sh: needs Docker with the compose plugin (docker compose)" >&2
    exit 2
fi

# The in-container part is POSIX sh: the image need not have bash.
docker compose -f "$compose_file" exec -T -u 0 "$broker" sh -s -- "$dir" "$restore" <<'INNER'
set -eu
dir=$1
restore=$2
config=/etc/kraft-jbod/server.properties
dirs=$(sed -n 's/^log\.dirs=//p' "$config")
case ",$dirs," in
    *",$dir,"*) ;;
    *) echo "fail-dir: $dir is not one of log.dirs=$dirs" >&2; exit 2 ;;
esac
meta=$(sed -n 's/^metadata\.log\.dir=//p' "$config")
[ -n "$meta" ] || meta=${dirs%%,*}
checkpoints="recovery-point-offset-checkpoint log-start-offset-checkpoint replication-offset-checkpoint"
if [ "$restore" = 1 ]; then
    chmod 755 "$dir"
    for f in $checkpoints; do
        if [ -d "$dir/$f" ]; then rm -rf "${dir:?}/$f"; fi
    done
    owner=$(stat -c %u:%g /opt/kafka)
    chown "$owner" "$dir"
    echo "restored $dir; restart the broker for Kafka to use it again"
    exit 0
fi
for f in $checkpoints; do
    rm -f "$dir/$f"
    mkdir -p "$dir/$f"
    : > "$dir/$f/kraft-jbod-failed"
done
chmod 000 "$dir"
echo "failed $dir (checkpoint renames and new files now fail)"
if [ "$dir" = "$meta" ]; then
    echo "note: $dir holds the metadata log; Kafka halts the broker when it fails" >&2
fi
INNER
