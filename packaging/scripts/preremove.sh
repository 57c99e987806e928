#!/bin/sh
# Runs before the files are removed. On removal (deb "remove", rpm "0"),
# not on an upgrade, every instance of the units is stopped: SIGTERM, so
# in-flight calls drain.
set -e
case "$1" in
remove | 0)
	if [ -d /run/systemd/system ]; then
		systemctl stop 'fiskfleet-agent@*.service' 'fiskfleet-gateway@*.service' >/dev/null 2>&1 || true
	fi
	;;
esac
