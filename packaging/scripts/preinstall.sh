#!/bin/sh
# Runs before the files are unpacked, on install and upgrade (deb and rpm):
# the fiskfleet system user and group the units run as.
set -e
if ! getent group fiskfleet >/dev/null; then
	groupadd --system fiskfleet
fi
if ! getent passwd fiskfleet >/dev/null; then
	useradd --system --gid fiskfleet --home-dir /var/lib/fiskfleet --no-create-home \
		--shell /usr/sbin/nologin --comment "fiskfleet services" fiskfleet
fi
