#!/bin/sh
# Runs after the files are removed. /etc/fiskfleet and the operator's
# configs in it are kept, on removal and on purge alike: they are the
# operator's, not the package's (the examples, which are the package's,
# are removed with it on purge). A purge (deb only; rpm has none) also
# removes what the package made besides its files: the units' enable
# links, the state directory and the fiskfleet user and group.
set -e
if [ -d /run/systemd/system ]; then
	systemctl daemon-reload >/dev/null 2>&1 || true
fi
if [ "$1" = purge ]; then
	rm -f /etc/systemd/system/*.wants/fiskfleet-agent@*.service /etc/systemd/system/*.wants/fiskfleet-gateway@*.service
	rm -rf /var/lib/fiskfleet
	if getent passwd fiskfleet >/dev/null; then
		userdel fiskfleet >/dev/null 2>&1 || true
	fi
	if getent group fiskfleet >/dev/null; then
		groupdel fiskfleet >/dev/null 2>&1 || true
	fi
fi
