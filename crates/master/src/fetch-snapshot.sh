#!/bin/sh
# Fetches the snapshot a restoring etcd starts from, and checks it against the SHA-256 recorded when the snapshot
# was taken (docs/master-config.md §9). The etcd pod's first init container runs it in the Cloud CLI image, with
# the script as `sh -c`'s text and its arguments after the name `fetch-snapshot`:
#
#   fetch-snapshot URL FILE [SHA256]
#
#   URL     gs://bucket/object, read with the VM's service account
#   FILE    where etcd's restore (the next init container) reads the snapshot
#   SHA256  the object's recorded `ha-sha256`, the SHA-256 of the database: an etcd snapshot is the database
#           followed by its own 32-byte SHA-256, which etcd's restore checks. Other bytes are refused and FILE is
#           not written, so etcd never sees them. Without it (a snapshot taken by hand), etcd's own check is all
#           there is.
#
# A failure ends the container with a reason in its log; the kubelet runs it again, and etcd does not start.
set -eu

if [ "$#" -lt 2 ] || [ "$#" -gt 3 ]; then
  echo "usage: fetch-snapshot URL FILE [SHA256]" >&2
  exit 2
fi
url=$1
file=$2
want=${3:-}

rm -f "$file" "$file.part"
gcloud storage cp "$url" "$file.part"
if [ -n "$want" ]; then
  size=$(wc -c <"$file.part")
  if [ "$size" -le 32 ]; then
    rm -f "$file.part"
    echo "fetch-snapshot: $url is $size bytes, too small to be an etcd snapshot; refusing to restore it" >&2
    exit 1
  fi
  got=$(head -c "$((size - 32))" "$file.part" | sha256sum | cut -d ' ' -f 1)
  if [ "$got" != "$want" ]; then
    rm -f "$file.part"
    echo "fetch-snapshot: $url has SHA-256 $got, not the $want recorded when it was taken; refusing to restore it" >&2
    exit 1
  fi
fi
mv "$file.part" "$file"
