#!/usr/bin/env bash
# A Debian 12 (bookworm) virtual machine for tests on a real host: Debian's
# own kernel (linux-image-amd64, 6.1) and systemd as PID 1, Debian's
# krb5-kdc, krb5-admin-server and krb5-user, sshd, bpftool. No realm: the
# tests make one. Used by `make test-vm` (vmtest/) and by hand:
#
#   scripts/vm.sh deps            apt-get install mmdebstrap, qemu (as root)
#   scripts/vm.sh build           build the base image, or reuse the cached
#                                 one; prints its directory
#   scripts/vm.sh boot            boot a throwaway overlay of it and wait
#                                 until the guest answers (ssh)
#   scripts/vm.sh exec CMD ARG... run CMD in the guest as root, arguments
#                                 kept as given (exec sh -c '...' for a
#                                 pipeline); its exit status is ours
#   scripts/vm.sh put FILE PATH   copy a host file into the guest
#   scripts/vm.sh get PATH FILE   copy a guest file to the host
#   scripts/vm.sh reboot          reboot the guest, wait until it answers
#   scripts/vm.sh stop            power it off, delete the overlay
#   scripts/vm.sh status          running or not, the ssh port
#
# Image: built with mmdebstrap from the Debian archive apt is configured
# with here (/etc/apt/sources.list.d/debian.sources or sources.list), as an
# ext4 file system without partitions, then qcow2; the kernel and initrd
# are extracted next to it and booted directly (-kernel/-initrd). Cached in
# $KRB5X_VM_CACHE (/var/cache/krb5-exporter-vm)/<hash of the recipe
# below>: a new recipe builds anew, an unchanged one is reused. Each boot
# writes to a qcow2 overlay of its own, so the cached base stays clean.
#
# Kernel: KRB5X_VM_KERNEL=bullseye (Debian 11's 5.10), jammy (Ubuntu
# 22.04's 5.15) or focal514 (Ubuntu 20.04's OEM kernel, upstream 5.14)
# builds and boots the same guest with that kernel instead of Debian 12's
# 6.1 (recipe_kernel below; an image of its own in the cache); every
# command takes it, as make test-vm-kernels does; bookworm names Debian 12's
# own.
#
# Boot: qemu with TCG (-accel tcg,thread=multi), not KVM: this machine kind's
# /dev/kvm (kvm-pvm) cannot boot a stock kernel. KRB5X_VM_ACCEL=kvm to try.
# User-mode networking, the guest's port 22 forwarded from 127.0.0.1 only;
# guest name kdc1.krb5x.test, Debian's krb5 configured (debconf) for the
# realm KRB5X.TEST with that KDC. Root logs in with the image's own key
# (id_ed25519 next to the image).
#
# One VM at a time on the machine: boot takes flock /tmp/krb5x-vm.lock and
# qemu holds it until it exits (waits up to KRB5X_VM_LOCK_WAIT seconds,
# 1800). The running VM's state (overlay, pid, port, serial console log
# console.log) is in $KRB5X_VM_DIR, by default /tmp/krb5x-vm-<name of this
# checkout's directory>, so two checkouts never drive each other's VM.
#
# Measured on this machine kind (2 cores, TCG): see docs/testing.md.
set -euo pipefail

root_dir=$(cd "$(dirname "$0")/.." && pwd)
cache=${KRB5X_VM_CACHE:-/var/cache/krb5-exporter-vm}
state=${KRB5X_VM_DIR:-/tmp/krb5x-vm-$(basename "$root_dir")}
lock=/tmp/krb5x-vm.lock
mem=${KRB5X_VM_MEM:-1536}
# One vCPU: under TCG with two, attaching a BPF trampoline (fentry, the
# kdcservice collector's mode on 6.1) locked the guest up, one vCPU waiting
# for ever in smp_call_function_many_cond for the other to answer the TLB
# flush of set_memory_ro (soft lockup; the emulation's, not the kernel's).
cpus=${KRB5X_VM_CPUS:-1}
accel=${KRB5X_VM_ACCEL:-tcg,thread=multi}
boot_wait=${KRB5X_VM_BOOT_WAIT:-600}

log() { echo "vm: $*" >&2; }
die() {
	log "$*"
	exit 1
}

# --- The recipe: everything below up to "end of recipe" is hashed into the
# cache key (declare -f), so changing any of it builds a new image.
recipe_suite=bookworm
recipe_packages=(
	systemd-sysv udev dbus initramfs-tools kmod e2fsprogs
	openssh-server iproute2 procps curl acl adduser less bpftool
	krb5-kdc krb5-admin-server krb5-user
)
# The guest's kernel: $KRB5X_VM_KERNEL names another distribution's, for
# the kernels KDCs run besides Debian 12's 6.1. recipe_kernel prints, one
# a line, "pkg PACKAGE" (installed instead of linux-image-amd64; apt's
# pkg/suite), "src SOURCES-LINE" (an apt source added to the build),
# "pin WHAT" (apt's Pin: of that source's packages, given priority 1 so
# that only the kernel comes from it) and
# "key DEB-URL FILE FINGERPRINT" (the keyring FILE of a keyring package,
# KEYRING in the source line, used only if it holds exactly the key of
# FINGERPRINT). Debian's initramfs-tools in the guest makes its initrd.
recipe_kernel() {
	case ${1:-} in
	'') echo "pkg linux-image-amd64" ;;
	bullseye) # Debian 11, Linux 5.10: Debian's signed kernel, security updates
		echo "pkg linux-image-amd64/bullseye-security"
		echo "src deb [signed-by=/usr/share/keyrings/debian-archive-keyring.gpg] http://deb.debian.org/debian-security bullseye-security main"
		echo "pin release n=bullseye-security"
		;;
	jammy) # Ubuntu 22.04, Linux 5.15: Ubuntu's generic kernel, updates
		echo "pkg linux-image-virtual/jammy-updates"
		echo "src deb [signed-by=KEYRING] http://archive.ubuntu.com/ubuntu jammy main"
		echo "src deb [signed-by=KEYRING] http://archive.ubuntu.com/ubuntu jammy-updates main"
		echo "pin release o=Ubuntu"
		# The archive's 2018 key, from Ubuntu's keyring package.
		echo "key http://archive.ubuntu.com/ubuntu/pool/main/u/ubuntu-keyring/ubuntu-keyring_2021.03.26_all.deb etc/apt/trusted.gpg.d/ubuntu-keyring-2018-archive.gpg F6ECB3762474EDA9D21B7022871920D1991BC93C"
		;;
	focal514) # Ubuntu 20.04's OEM kernel, upstream Linux 5.14 (RHEL 9's
		# base, whose mirrors are out of reach): its last ABI, named
		# exactly (the oem-20.04 metapackages moved on to 5.15); signed
		echo "pkg linux-image-5.14.0-1059-oem/focal-updates"
		echo "src deb [signed-by=KEYRING] http://archive.ubuntu.com/ubuntu focal-updates main"
		echo "pin release o=Ubuntu"
		echo "key http://archive.ubuntu.com/ubuntu/pool/main/u/ubuntu-keyring/ubuntu-keyring_2021.03.26_all.deb etc/apt/trusted.gpg.d/ubuntu-keyring-2018-archive.gpg F6ECB3762474EDA9D21B7022871920D1991BC93C"
		;;
	*) return 1 ;;
	esac
}
# debconf answers a new user gives: the realm, its KDC and admin server;
# Debian's krb5-kdc then writes /etc/krb5kdc/kdc.conf (no [logging]).
recipe_debconf() {
	cat <<'EOF'
krb5-config krb5-config/default_realm string KRB5X.TEST
krb5-config krb5-config/kerberos_servers string kdc1.krb5x.test
krb5-config krb5-config/admin_server string kdc1.krb5x.test
krb5-config krb5-config/add_servers_realm string KRB5X.TEST
krb5-config krb5-config/add_servers boolean true
krb5-config krb5-config/read_conf boolean true
krb5-kdc krb5-kdc/debconf boolean true
krb5-admin-server krb5-admin-server/kadmind boolean true
EOF
}
# The guest system, set up in the tree ($1) before it becomes an image; $2
# is the root's public key.
recipe_customize() {
	local r=$1 pub=$2
	echo kdc1 >"$r/etc/hostname"
	cat >"$r/etc/hosts" <<'EOF'
127.0.0.1	localhost
127.0.1.1	kdc1.krb5x.test kdc1
::1		localhost ip6-localhost ip6-loopback
EOF
	echo '/dev/vda / ext4 rw,errors=remount-ro 0 1' >"$r/etc/fstab"
	install -d -m 0700 "$r/root/.ssh"
	install -m 0600 "$pub" "$r/root/.ssh/authorized_keys"
	cat >"$r/etc/systemd/network/10-eth.network" <<'EOF'
[Match]
Name=e*
[Network]
DHCP=ipv4
EOF
	chroot "$r" systemctl enable systemd-networkd.service
	# Nothing that would run in the middle of a test.
	chroot "$r" systemctl mask apt-daily.timer apt-daily-upgrade.timer \
		man-db.timer e2scrub_all.timer e2scrub_reap.service fstrim.timer
	# The serial console: the boot's log, and a login prompt for debugging.
	chroot "$r" systemctl enable serial-getty@ttyS0.service
	# An ordinary user, for what an ordinary user can do (forged logs).
	chroot "$r" useradd --create-home --shell /bin/bash mallory
	rm -f "$r/etc/machine-id"
	touch "$r/etc/machine-id"
}
# --- end of recipe

kernel=${KRB5X_VM_KERNEL:-}
# bookworm: Debian 12's own kernel by name (its image, for TestKernel).
[ "$kernel" != bookworm ] || kernel=

recipe_hash() {
	{
		# Debian 12's own kernel: the hash it had before the kernel was a
		# choice, so that its cached image stays valid.
		if [ -z "$kernel" ]; then
			echo "$recipe_suite ${recipe_packages[*]/%initramfs-tools/linux-image-amd64 initramfs-tools}"
		else
			# That kernel's lines alone: adding another kernel
			# leaves the cached images of the others valid.
			echo "$recipe_suite ${recipe_packages[*]}"
			recipe_kernel "$kernel" || true
			echo "kernel $kernel"
		fi
		declare -f recipe_debconf recipe_customize
		sources_file && cat "$(sources_file)"
	} | sha256sum | cut -c1-16
}

# The apt sources this machine is configured with: mmdebstrap reads a
# .sources or .list file given as its mirror argument.
sources_file() {
	local f
	for f in /etc/apt/sources.list.d/debian.sources /etc/apt/sources.list; do
		if [ -s "$f" ] && grep -q '^[^#]*\(deb\|URIs:\)' "$f"; then
			echo "$f"
			return 0
		fi
	done
	return 1
}

image_dir() { echo "$cache/$(recipe_hash)"; }

cmd_deps() {
	local need=() p
	for p in mmdebstrap qemu-system-x86 qemu-utils e2fsprogs openssh-client; do
		dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || need+=("$p")
	done
	((${#need[@]})) || return 0
	log "installing ${need[*]}"
	apt-get update -qq
	DEBIAN_FRONTEND=noninteractive apt-get install -y -qq -o DPkg::Lock::Timeout=300 \
		--no-install-recommends "${need[@]}" >/dev/null
}

# fetch_key DIR DEB-URL FILE FINGERPRINT: FILE of the keyring package at
# DEB-URL as DIR/kernel-archive.gpg, if it holds exactly the key of
# FINGERPRINT (the fingerprint is what is trusted, as a Signed-By would).
fetch_key() {
	local dir=$1 url=$2 file=$3 fpr=$4 got
	curl -sSf --max-time 120 -o "$dir/keyring.deb" "$url" || die "cannot fetch $url"
	dpkg-deb --fsys-tarfile "$dir/keyring.deb" | tar -xO "./$file" >"$dir/kernel-archive.gpg" ||
		die "$url has no $file"
	got=$(GNUPGHOME=$(mktemp -d) gpg --show-keys --with-colons "$dir/kernel-archive.gpg" 2>/dev/null |
		awk -F: '$1 == "fpr" && !seen++ { print $10 } $1 == "pub" { n++ } END { if (n != 1) print "keys:" n }')
	[ "$got" = "$fpr" ] || die "$url: $file holds $got, not the key $fpr"
	rm -f "$dir/keyring.deb"
}

cmd_build() {
	local dir
	dir=$(image_dir)
	if [ -f "$dir/base.qcow2" ]; then
		echo "$dir"
		return 0
	fi
	[ "$(id -u)" -eq 0 ] || die "building the image needs root (mmdebstrap --mode=root)"
	for p in mmdebstrap qemu-img mke2fs ssh-keygen; do
		command -v "$p" >/dev/null || die "$p is missing: scripts/vm.sh deps"
	done
	mkdir -p "$cache"
	# One build at a time; a second caller waits and reuses it.
	exec 8>"$cache/.build.lock"
	flock 8
	if [ -f "$dir/base.qcow2" ]; then
		echo "$dir"
		return 0
	fi
	local t0 tmp src what arg
	local -a pkgs=("${recipe_packages[@]}") mirrors=()
	t0=$(date +%s)
	tmp=$(mktemp -d "$cache/.build.XXXXXX")
	trap "rm -rf '$tmp'" EXIT
	ssh-keygen -q -t ed25519 -N '' -C krb5x-vm -f "$tmp/id_ed25519"
	src=$(sources_file || echo http://deb.debian.org/debian)
	# The kernel's packages, sources and keys; its sources' packages are
	# pinned low, for apt's resolver and then in the guest.
	: >"$tmp/pin"
	while read -r what arg; do
		case $what in
		pkg) pkgs+=("$arg") ;;
		src)
			mirrors+=("${arg//KEYRING/$tmp/kernel-archive.gpg}") ;;
		pin) printf 'Package: *\nPin: %s\nPin-Priority: 1\n\n' "$arg" >>"$tmp/pin" ;;
		key) fetch_key "$tmp" $arg ;;
		esac
	done < <(recipe_kernel "$kernel" || die "KRB5X_VM_KERNEL=$kernel: unknown (bullseye, jammy, focal514)")
	log "building the $recipe_suite image in $dir (apt sources: $src${mirrors:+ ${mirrors[*]}}; kernel ${pkgs[-1]})"
	recipe_debconf >"$tmp/debconf"
	declare -f recipe_customize >"$tmp/customize.sh"
	echo 'recipe_customize "$@"' >>"$tmp/customize.sh"
	mmdebstrap --mode=root --variant=apt --quiet \
		--include="$(
			IFS=,
			echo "${pkgs[*]}"
		)" \
		--setup-hook="mkdir -p \"\$1/etc/apt/preferences.d\" && cp $tmp/pin \"\$1/etc/apt/preferences.d/kernel\"" \
		--essential-hook="chroot \"\$1\" debconf-set-selections < $tmp/debconf" \
		--customize-hook="bash $tmp/customize.sh \"\$1\" $tmp/id_ed25519.pub" \
		"$recipe_suite" "$tmp/root" "$src" "${mirrors[@]}"
	# One kernel in the image: the one booted.
	[ "$(find "$tmp/root/boot" -name 'vmlinuz-*' | wc -l)" = 1 ] || die "not one kernel in the image: $(ls "$tmp/root/boot")"
	cp "$tmp/root"/boot/vmlinuz-* "$tmp/vmlinuz"
	cp "$tmp/root"/boot/initrd.img-* "$tmp/initrd.img"
	basename "$tmp/root"/boot/vmlinuz-* | cut -c9- >"$tmp/kernel-release"
	# The tree as an ext4 file system (room for the tests), then qcow2.
	mke2fs -q -t ext4 -L root -d "$tmp/root" "$tmp/root.ext4" 4G
	qemu-img convert -O qcow2 "$tmp/root.ext4" "$tmp/base.qcow2"
	rm -rf "$tmp/root" "$tmp/root.ext4"
	chmod 0444 "$tmp/base.qcow2"
	mv "$tmp" "$dir"
	trap - EXIT
	log "image built in $(($(date +%s) - t0))s: $dir"
	echo "$dir"
}

running() {
	[ -f "$state/qemu.pid" ] && kill -0 "$(cat "$state/qemu.pid")" 2>/dev/null
}

ssh_args() {
	echo -i "$(cat "$state/image")/id_ed25519" -p "$(cat "$state/port")" \
		-o StrictHostKeyChecking=no -o UserKnownHostsFile=/dev/null \
		-o LogLevel=ERROR -o ConnectTimeout=10 -o BatchMode=yes \
		-o ServerAliveInterval=15 -o ServerAliveCountMax=8 \
		-o ControlMaster=auto -o ControlPath="$state/ssh.sock" -o ControlPersist=120 root@127.0.0.1
}

# Ends the shared ssh connection (commands reuse one: a new key exchange
# costs seconds of emulated CPU); the next command opens a new one.
ssh_close() {
	ssh -o ControlPath="$state/ssh.sock" -O exit 127.0.0.1 >/dev/null 2>&1 || true
}

# Waits until the guest runs commands over ssh (deadline in seconds).
wait_guest() {
	local deadline=$(($(date +%s) + $1))
	# shellcheck disable=SC2046
	until ssh $(ssh_args) true 2>/dev/null; do
		running || {
			tail -n 40 "$state/console.log" >&2 || true
			die "qemu exited during boot (console: $state/console.log)"
		}
		if [ "$(date +%s)" -ge "$deadline" ]; then
			tail -n 40 "$state/console.log" >&2 || true
			die "no answer from the guest in $1s (console: $state/console.log)"
		fi
		sleep 2
	done
}

cmd_boot() {
	local dir t0 port try
	running && die "a VM already runs from $state (scripts/vm.sh stop)"
	dir=$(cmd_build)
	command -v qemu-system-x86_64 >/dev/null || die "qemu-system-x86_64 is missing: scripts/vm.sh deps"
	rm -rf "$state"
	mkdir -p "$state"
	echo "$dir" >"$state/image"
	qemu-img create -q -f qcow2 -F qcow2 -b "$dir/base.qcow2" "$state/overlay.qcow2"
	# qemu inherits fd 9 and so holds the lock as long as it runs.
	exec 9>"$lock"
	log "waiting for $lock"
	flock -w "${KRB5X_VM_LOCK_WAIT:-1800}" 9 || die "another VM holds $lock"
	t0=$(date +%s)
	for try in 1 2 3 4 5; do
		port=$((20000 + RANDOM % 10000))
		ss -Hltn "sport = :$port" | grep -q . && continue
		echo "$port" >"$state/port"
		if qemu-system-x86_64 -name krb5x-vm -machine q35 -accel "$accel" -cpu max \
			-smp "$cpus" -m "$mem" -display none -daemonize \
			-pidfile "$state/qemu.pid" -serial "file:$state/console.log" \
			-kernel "$dir/vmlinuz" -initrd "$dir/initrd.img" \
			-append "root=/dev/vda rw console=ttyS0 net.ifnames=0 systemd.show_status=0" \
			-drive "file=$state/overlay.qcow2,if=virtio,format=qcow2,cache=unsafe,discard=unmap" \
			-netdev "user,id=n0,hostfwd=tcp:127.0.0.1:$port-:22" \
			-device virtio-net-pci,netdev=n0 \
			-device virtio-rng-pci 2>"$state/qemu.err"; then
			break
		fi
		grep -q 'Could not set up host forwarding' "$state/qemu.err" || {
			cat "$state/qemu.err" >&2
			die "qemu did not start"
		}
	done
	running || die "qemu did not start: $(cat "$state/qemu.err")"
	exec 9>&-
	wait_guest "$boot_wait"
	log "guest up in $(($(date +%s) - t0))s (ssh port $port, state $state)"
}

cmd_exec() {
	running || die "no VM runs from $state (scripts/vm.sh boot)"
	(($#)) || die "exec: no command"
	# shellcheck disable=SC2046
	exec ssh $(ssh_args) -- "$(printf '%q ' "$@")"
}

cmd_put() {
	running || die "no VM runs from $state"
	# shellcheck disable=SC2046
	ssh $(ssh_args) -- "cat > $(printf '%q' "$2")" <"$1"
}

cmd_get() {
	running || die "no VM runs from $state"
	# shellcheck disable=SC2046
	ssh $(ssh_args) -- "cat $(printf '%q' "$1")" >"$2"
}

cmd_reboot() {
	local t0 boot_id
	running || die "no VM runs from $state"
	t0=$(date +%s)
	# shellcheck disable=SC2046
	boot_id=$(ssh $(ssh_args) cat /proc/sys/kernel/random/boot_id)
	# shellcheck disable=SC2046
	ssh $(ssh_args) systemctl reboot || true
	ssh_close
	local deadline=$(($(date +%s) + boot_wait))
	# shellcheck disable=SC2046
	until [ "$(ssh $(ssh_args) cat /proc/sys/kernel/random/boot_id 2>/dev/null)" != "" ] &&
		[ "$(ssh $(ssh_args) cat /proc/sys/kernel/random/boot_id 2>/dev/null)" != "$boot_id" ]; do
		running || die "qemu exited during reboot (console: $state/console.log)"
		[ "$(date +%s)" -lt "$deadline" ] || die "no answer after reboot in ${boot_wait}s"
		sleep 2
	done
	log "guest rebooted in $(($(date +%s) - t0))s"
}

cmd_stop() {
	local pid i
	if ! running; then
		rm -rf "$state"
		return 0
	fi
	pid=$(cat "$state/qemu.pid")
	# shellcheck disable=SC2046
	timeout 20 ssh $(ssh_args) systemctl poweroff >/dev/null 2>&1 || true
	ssh_close
	for i in $(seq 60); do
		kill -0 "$pid" 2>/dev/null || break
		sleep 1
	done
	kill -0 "$pid" 2>/dev/null && kill "$pid"
	for i in $(seq 10); do
		kill -0 "$pid" 2>/dev/null || break
		sleep 1
	done
	rm -rf "$state"
}

cmd_status() {
	if running; then
		echo "running: pid $(cat "$state/qemu.pid"), ssh 127.0.0.1:$(cat "$state/port"), state $state"
	else
		echo "not running (state $state)"
		return 1
	fi
}

case "${1:-}" in
deps | build | boot | exec | put | get | reboot | stop | status)
	c=$1
	shift
	"cmd_$c" "$@"
	;;
hash) recipe_hash ;;
*)
	sed -n '2,/^set -euo/p' "$0" | sed '$d' >&2
	exit 2
	;;
esac
