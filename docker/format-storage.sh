#!/bin/sh
# Format a real Kafka broker's log directories for a kraft-jbod compose cluster.
#
# Runs as root in the broker's own image (the `<broker>-storage` services of compose-CLUSTER.yaml):
# `kafka-storage.sh format` writes meta.properties (version=1, cluster.id, node.id and a
# fresh directory.id) into every log.dirs entry and the metadata dir, then the dirs are
# given to the user that owns /opt/kafka, which is the user the image runs Kafka as.
# --ignore-formatted keeps existing meta.properties (and their directory.ids) on reruns;
# a directory of another cluster still makes the format fail, loudly.
#
# usage: format-storage.sh CLUSTER_ID METADATA_VERSION
# KRAFT_JBOD_KAFKA_HOME (default /opt/kafka) and KRAFT_JBOD_SERVER_CONFIG (default
# /etc/kraft-jbod/server.properties) exist for tests/test_docker_files.py, which runs this
# script outside a container.
set -eu

if [ "$#" -ne 2 ]; then
    echo "usage: $0 CLUSTER_ID METADATA_VERSION" >&2
    exit 2
fi
cluster_id=$1
release=$2
kafka_home=${KRAFT_JBOD_KAFKA_HOME:-/opt/kafka}
config=${KRAFT_JBOD_SERVER_CONFIG:-/etc/kraft-jbod/server.properties}

"$kafka_home/bin/kafka-storage.sh" format --ignore-formatted \
    --cluster-id "$cluster_id" --release-version "$release" --config "$config"

owner=$(stat -c %u:%g "$kafka_home")
dirs=$(sed -n 's/^log\.dirs=//p' "$config" | tr ',' ' ')
meta=$(sed -n 's/^metadata\.log\.dir=//p' "$config")
for d in $dirs $meta; do
    chown -R "$owner" "$d"
    echo "== $d/meta.properties"
    cat "$d/meta.properties"
done
