# Recipe of the lab node image: what a DGX Spark looks like to the playbooks, minus hardware.
# Run by lab/build-image.sh with bash inside a container of the debootstrap'ed bookworm minbase.
# The image tag is a hash of this file and the builder, so any edit here rebuilds the image once.
# image-cmd: ["/lib/systemd/systemd"]
set -euo pipefail
export DEBIAN_FRONTEND=noninteractive

# Packages must not start services at build time: there is no init in the build container.
printf '#!/bin/sh\nexit 101\n' >/usr/sbin/policy-rc.d
chmod 0755 /usr/sbin/policy-rc.d

apt-get update -qq
# systemd + dbus + udev: PID 1 and what `netplan apply` needs (udevadm, D-Bus).
# docker.io: each node's own engine. lldpd: real LLDP neighbours over the cable networks.
# openssh-server: node-to-node image and model transfers run over SSH between cable addresses.
# dkms, build-essential, linux-headers-amd64, mokutil, openssl: the host role's DKMS build and signing,
# against Debian's real headers for a Debian kernel release (not the running kernel).
# grub-common, grub2-common: grub-editenv / grub-reboot on stand-in /boot files.
# network-manager: the netplan renderer of DGX OS, run by the lab nodes that render the fabric for it.
# python3-venv: the router role installs it on a Spark from the archive; lab nodes reach no archive.
# docker-registry: the image registry role installs it on the builder from the archive, for the same reason.
apt-get install -y -qq --no-install-recommends \
  systemd systemd-sysv dbus udev \
  python3 python3-apt python3-requests python3-aiohttp python3-yaml python3-venv \
  iproute2 iputils-ping procps kmod ca-certificates curl rsync openssh-client openssh-server less gnupg \
  lldpd netplan.io network-manager docker.io git sudo \
  dkms build-essential linux-headers-amd64 openssl mokutil grub-common grub2-common \
  apt-utils dpkg-dev docker-registry >/dev/null

# Consoles do not exist in a container; getty units would restart forever.
systemctl mask getty.target getty@.service serial-getty@.service console-getty.service getty-static.service
# networkd is the lab's netplan renderer. With no managed link, wait-online would time out and fail.
systemctl enable systemd-networkd.service
systemctl mask systemd-networkd-wait-online.service
# NetworkManager runs only on the nodes whose inventory renders the fabric for it: lab.py starts it there, after
# the interfaces have their planned names. Never a profile of its own on a port (no "Wired connection" with
# DHCP on a cable); lab.py also leaves it the management interface alone. Its wait-online unit has nothing
# to wait for.
systemctl disable NetworkManager.service NetworkManager-dispatcher.service
systemctl mask NetworkManager-wait-online.service
# The packaged registry would listen on every address of every node: the image registry role runs its own units.
systemctl disable docker-registry.service
printf '[main]\nno-auto-default=*\n' >/etc/NetworkManager/conf.d/50-sparkfleet-lab.conf
# udevd is skipped by its own condition (read-only /sys in a container); udevadm stays for netplan.
# The kernel is the host's: nothing to load, nothing to build at boot for it.
systemctl mask dkms.service
# SSH host keys are made at each node's first boot, so no two nodes share one (the image carries none).
rm -f /etc/ssh/ssh_host_*
mkdir -p /etc/systemd/system/ssh.service.d
printf '[Service]\nExecStartPre=\nExecStartPre=/usr/bin/ssh-keygen -A\nExecStartPre=/usr/sbin/sshd -t\n' \
  >/etc/systemd/system/ssh.service.d/sparkfleet-host-keys.conf
systemctl enable ssh.service
# Each boot gets a fresh identity, like a freshly installed Spark.
: >/etc/machine-id
rm -f /var/lib/dbus/machine-id

rm -f /usr/sbin/policy-rc.d
apt-get clean
rm -rf /var/cache/apt/archives/*.deb /tmp/* /var/tmp/*
