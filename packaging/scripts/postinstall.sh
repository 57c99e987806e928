#!/bin/sh
# Runs after the files are unpacked, on install and upgrade (deb and rpm).
# /etc/fiskfleet holds the operator's configs, which may name tokens: root
# writes them, the fiskfleet group reads them. Running instances are
# restarted on an upgrade so they run the new binaries; try-restart leaves
# stopped ones stopped, so a fresh install starts nothing.
set -e
chown root:fiskfleet /etc/fiskfleet
chmod 0750 /etc/fiskfleet
if [ -d /run/systemd/system ]; then
	systemctl daemon-reload >/dev/null 2>&1 || true
	systemctl try-restart 'fiskfleet-agent@*.service' 'fiskfleet-gateway@*.service' >/dev/null 2>&1 || true
fi
