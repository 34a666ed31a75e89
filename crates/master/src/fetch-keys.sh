#!/bin/sh
# Fetches this master's private keys from Secret Manager at first boot, before the kubelet starts
# (docs/master-config.md §11). Run by cloud-init's runcmd as root:
#
#   fetch-keys.sh SECRET SHA256 ORIGIN
#
#   SECRET  projects/<project>/secrets/<id>: the bundle the provider wrote for this replica
#   SHA256  the bundle's digest, from user-data: any other bundle is refused, so a newer version written for
#           another VM of the same name is never taken for this one's
#   ORIGIN  Secret Manager's origin (https://secretmanager.googleapis.com, or a custom endpoint)
#
# The bundle is a tar of the keys and kubeconfigs with their modes and owners; it is unpacked over `/` (or
# $DESTDIR). The token is the VM's service account's, from the metadata server ($GCE_METADATA_HOST, as Google's
# client libraries name another one). Until the secret can be read (IAM grants take a minute to spread), it
# retries with a back-off of up to a minute and says why on the serial console; the kubelet is not started
# without the keys.
set -eu

if [ "$#" -ne 3 ]; then
  echo "usage: fetch-keys.sh SECRET SHA256 ORIGIN" >&2
  exit 2
fi
secret=$1
want=$2
origin=$3
metadata="http://${GCE_METADATA_HOST:-metadata.google.internal}/computeMetadata/v1"
root=${DESTDIR:-/}

umask 022
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT

# One attempt: the bundle in $work/keys.tar, or a reason on stderr and a failure.
fetch() {
  curl -fsS --max-time 30 -H 'Metadata-Flavor: Google' \
    "$metadata/instance/service-accounts/default/token" >"$work/token.json" || return 1
  token=$(tr -d ' \n\r\t' <"$work/token.json" | sed -n 's/.*"access_token":"\([^"]*\)".*/\1/p')
  if [ -z "$token" ]; then
    echo "fetch-keys: the metadata server gave no access token" >&2
    return 1
  fi
  curl -fsS --max-time 30 -H "Authorization: Bearer $token" \
    "$origin/v1/$secret/versions/latest:access" >"$work/answer.json" || return 1
  tr -d ' \n\r\t' <"$work/answer.json" | sed -n 's/.*"data":"\([^"]*\)".*/\1/p' \
    | base64 -d >"$work/keys.tar" || return 1
  got=$(sha256sum "$work/keys.tar" | cut -d ' ' -f 1)
  if [ "$got" != "$want" ]; then
    echo "fetch-keys: $secret holds a bundle with SHA-256 $got, not this VM's $want" >&2
    return 1
  fi
}

delay=1
until fetch; do
  echo "fetch-keys: could not read this master's keys from $secret; trying again in ${delay}s" >&2
  sleep "$delay"
  if [ "$delay" -lt 60 ]; then
    delay=$((delay * 2))
  fi
done
tar -xpf "$work/keys.tar" -C "$root"
echo "fetch-keys: wrote $(tar -tf "$work/keys.tar" | wc -l) files from $secret" >&2
