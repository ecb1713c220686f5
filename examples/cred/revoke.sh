#!/bin/sh
# A sample revoke hook for `pki cred`, the partner of mint.sh: reads one
# credential on stdin and removes it from the file-based "secret service"
# (SERVICE/NAME/TOKEN). pki runs it as `sh -c CMD` with PKI_CRED_NAME set.
#
# Revoking must be idempotent: after a crash pki revokes again rather than
# forget a credential, so a token already gone (or never minted) is success.
set -eu
service=${1:?usage: revoke.sh SERVICE-DIR}
name=${PKI_CRED_NAME:?PKI_CRED_NAME is set by pki}
token=
IFS= read -r token || [ -n "$token" ]
case "$token" in
'' | *[!0-9a-f]*)
    # Not a token this service mints (what a failed mint printed, say):
    # nothing of it can be live here.
    echo "revoke.sh: $name: not a token of this service, nothing to revoke" >&2
    exit 0
    ;;
esac
rm -f "$service/$name/$token"
