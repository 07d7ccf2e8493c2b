#!/bin/sh
# gsv node installer, made by a gsv gateway (gsv @VERSION@) for the node and gateway
# named below (node_id, url).
#
#   curl -fsSL ... https://GATEWAY:PORT/v1/install/NODE_ID | sh -s -- --token gsv_join_...
#
# Options: --token TOKEN (the join token; or --token-file FILE), --system | --user,
# --bin-dir DIR. Any other option goes to `gsv node install` (--workspace DIR,
# --data DIR, --read-only, --approve-shell REGEX, --ca FILE, ...).
#
# What it does: picks the gsv build for this OS and CPU from the gateway, checks its
# SHA-256 against the value the gateway wrote below, and runs `gsv node install` with
# it, which enrolls the node with the join token (nothing is installed if that fails),
# puts gsv in the bin directory (/usr/local/bin as root, else ~/.local/bin) and runs
# the node as a service (systemd, launchd, or in the background where there is none).
# Run again, it changes nothing, or upgrades gsv when the gateway has a new build.
#
# Everything is inside one function called on the last line, so a download cut short
# runs nothing.

gsv_install() {
    set -eu
    url=@URL@
    node_id=@NODE_ID@
    # curl's --pinnedpubkey for the gateway's certificate ('' when not pinned), and
    # whether the certificate is self-signed (curl cannot check its chain, only the pin).
    curl_pin=@CURL_PIN@
    self_signed=@SELF_SIGNED@
    # The certificate fingerprint the node pins (gsv node --pin; '' for none).
    node_pin=@NODE_PIN@
    # One build a line: target and SHA-256.
    builds=@BUILDS@

    token=""
    token_file=""
    bin_dir=""
    scope=""
    own_trust=""
    n=$#
    while [ "$n" -gt 0 ]; do
        arg=$1
        shift
        n=$((n - 1))
        case $arg in
        --token | --bin-dir)
            [ "$n" -gt 0 ] || gsv_die "$arg needs a value"
            value=$1
            shift
            n=$((n - 1))
            if [ "$arg" = --token ]; then token=$value; else bin_dir=$value; fi
            ;;
        --token=*) token=${arg#--token=} ;;
        --bin-dir=*) bin_dir=${arg#--bin-dir=} ;;
        --token-file | --token-file=*)
            token_file=1
            set -- "$@" "$arg"
            ;;
        --system | --user)
            scope=$arg
            set -- "$@" "$arg"
            ;;
        --pin | --pin=* | --ca | --ca=*)
            own_trust=1
            set -- "$@" "$arg"
            ;;
        *) set -- "$@" "$arg" ;;
        esac
    done
    if [ -z "$token" ] && [ -z "$token_file" ]; then
        gsv_die "give the join token: ... | sh -s -- --token gsv_join_... (make one with: gsv token create node $node_id --install)"
    fi

    case $(uname -s) in
    Linux) os=linux ;;
    Darwin) os=macos ;;
    FreeBSD) os=freebsd ;;
    *) gsv_die "unsupported operating system: $(uname -s)" ;;
    esac
    case $(uname -m) in
    x86_64 | amd64) arch=x86_64 ;;
    aarch64 | arm64) arch=aarch64 ;;
    armv6* | armv7* | armhf) arch=arm ;;
    i386 | i486 | i586 | i686) arch=x86 ;;
    *) arch=$(uname -m) ;;
    esac
    target=$os-$arch
    want=""
    have=""
    while read -r t h; do
        [ -n "$t" ] || continue
        have="$have $t"
        if [ "$t" = "$target" ]; then want=$h; fi
    done <<EOF
$builds
EOF
    [ -n "$want" ] || gsv_die "the gateway has no gsv build for $target (it has:$have); put one in its data directory as dist/$target"

    if [ -z "$bin_dir" ]; then
        case $scope in
        --system) bin_dir=/usr/local/bin ;;
        --user) bin_dir=${HOME:?HOME is not set: pass --bin-dir DIR}/.local/bin ;;
        *)
            if [ "$(id -u)" = 0 ]; then
                bin_dir=/usr/local/bin
            else
                bin_dir=${HOME:?HOME is not set: pass --bin-dir DIR}/.local/bin
            fi
            ;;
        esac
    fi
    gsv_sha256_tool

    exe=$bin_dir/gsv
    if [ -f "$exe" ] && [ -x "$exe" ] && [ "$(gsv_sha256 "$exe")" = "$want" ]; then
        gsv_say "$exe is already the gateway's gsv build for $target"
    else
        gsv_tmp=$(mktemp -d 2>/dev/null || mktemp -d -t gsv)
        trap 'rm -rf "$gsv_tmp"' EXIT
        trap 'exit 130' INT TERM
        gsv_say "downloading gsv for $target from $url"
        if ! gsv_fetch "$url/v1/dist/$target" "$gsv_tmp/gsv"; then
            gsv_die "the download failed (see curl's message above); nothing was installed"
        fi
        got=$(gsv_sha256 "$gsv_tmp/gsv")
        if [ "$got" != "$want" ]; then
            gsv_die "the downloaded gsv has SHA-256 $got, not $want as the gateway's script says: it was changed on the gateway or on the way; nothing was installed"
        fi
        gsv_say "SHA-256 checked: $got"
        chmod 755 "$gsv_tmp/gsv"
        exe=$gsv_tmp/gsv
    fi

    if [ -n "$node_pin" ] && [ -z "$own_trust" ]; then
        set -- --pin "$node_pin" "$@"
    fi
    if [ -n "$token" ]; then
        GSV_TOKEN=$token
        export GSV_TOKEN
    fi
    status=0
    "$exe" node install --gateway "$url" --id "$node_id" --bin-dir "$bin_dir" "$@" </dev/null || status=$?
    if [ "$status" -ne 0 ]; then
        gsv_say "error: gsv node install failed (exit status $status); see its message above"
        exit "$status"
    fi
}

gsv_say() { printf 'gsv-install: %s\n' "$*" >&2; }
gsv_die() {
    gsv_say "error: $*"
    exit 1
}

gsv_sha256_tool() {
    if command -v sha256sum >/dev/null 2>&1; then
        gsv_sha=sha256sum
    elif command -v shasum >/dev/null 2>&1; then
        gsv_sha=shasum
    elif command -v openssl >/dev/null 2>&1; then
        gsv_sha=openssl
    else
        gsv_die "no sha256sum, shasum or openssl to check the download with"
    fi
}

gsv_sha256() {
    case $gsv_sha in
    sha256sum) sha256sum "$1" | cut -d' ' -f1 ;;
    shasum) shasum -a 256 "$1" | cut -d' ' -f1 ;;
    openssl) openssl dgst -sha256 -r "$1" | cut -d' ' -f1 ;;
    esac
}

gsv_fetch() {
    if [ -z "$curl_pin" ]; then
        curl -fsSL -o "$2" "$1"
    elif [ "$self_signed" = 1 ]; then
        curl -fsSL -k --pinnedpubkey "$curl_pin" -o "$2" "$1"
    else
        curl -fsSL --pinnedpubkey "$curl_pin" -o "$2" "$1"
    fi
}

gsv_install "$@"
