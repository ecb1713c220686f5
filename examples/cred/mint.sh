#!/bin/sh
# A sample mint hook for `pki cred`: mints a random token in a file-based
# "secret service" (a directory holding one file per live credential,
# SERVICE/NAME/TOKEN) and prints it on stdout, which is what pki records as
# DIR/creds/NAME/current. pki runs it as `sh -c CMD` with PKI_CRED_NAME set.
#
#   pki cred init DIR db --expire 720h --grace 10m \
#       --mint-cmd "/path/to/mint.sh /var/lib/service" \
#       --revoke-cmd "/path/to/revoke.sh /var/lib/service"
#
# For a real system, replace the line that creates the file with its call
# (a cloud IAM key, a database role, a Redis ACL user), keep stdout for the
# credential alone and send diagnostics to stderr: pki keeps whatever this
# prints, and revokes it if the hook then fails.
set -eu
service=${1:?usage: mint.sh SERVICE-DIR}
name=${PKI_CRED_NAME:?PKI_CRED_NAME is set by pki}
umask 077
mkdir -p "$service/$name"
token=$(od -An -N16 -tx1 /dev/urandom | tr -d ' \n')
# The service accepts the token from now on.
: >"$service/$name/$token"
printf '%s\n' "$token"
