#!/usr/bin/env bash
# layers.sh - the layers of docs/ARCHITECTURE.md point one way: no file of
# a lower layer includes a higher layer's header or calls a function a
# higher layer defines.
#
#   bash test/api/layers.sh SRC_DIR OBJECT...
#
# SRC_DIR is the tree's src/; the objects are libbe's (be_objs), whose
# paths name their layer (.../src/<layer>/...). The order, lowest first:
#   util < alloc < xport < engine < sock < discovery < rpc < ps
# (xport/<transport>/ counts as xport). Includes are read from the
# sources ('#include "layer/..."'); calls from the objects (nm: each
# undefined symbol is looked up among the symbols the others define).
# Prints every violation; exit status 1 if there is one.
set -uo pipefail

order=(util alloc xport engine sock discovery rpc ps)
declare -A rank
for i in "${!order[@]}"; do
	rank[${order[$i]}]=$i
done

[ $# -ge 2 ] || { echo "usage: layers.sh SRC_DIR OBJECT..." >&2; exit 2; }
src=$1
shift
bad=0

# layer_of PATH: the layer folder after the last "src/" in PATH.
layer_of() {
	local p=${1##*/src/}
	echo "${p%%/*}"
}

# Includes.
while IFS= read -r f; do
	l=$(layer_of "$f")
	[ -n "${rank[$l]:-}" ] || { echo "layers: $f: folder $l is in no layer"; bad=1; continue; }
	while IFS= read -r inc; do
		il=${inc%%/*}
		[ -n "${rank[$il]:-}" ] || continue
		if [ "${rank[$il]}" -gt "${rank[$l]}" ]; then
			echo "layers: ${f#"$src"/} ($l) includes $inc ($il, a higher layer)"
			bad=1
		fi
	done < <(sed -n 's/^[[:space:]]*#[[:space:]]*include[[:space:]]*"\([a-z_]*\/[^"]*\)".*/\1/p' "$f")
done < <(find "$src" -name '*.[ch]' | sort)

# Calls: who defines each global symbol.
nm_bin=nm
command -v gcc-nm >/dev/null && nm_bin=gcc-nm
declare -A def
n=0
for o in "$@"; do
	l=$(layer_of "$o")
	[ -n "${rank[$l]:-}" ] || { echo "layers: $o: folder $l is in no layer"; bad=1; continue; }
	while read -r sym; do
		def[$sym]=$l
	done < <("$nm_bin" --defined-only --extern-only "$o" | awk 'NF == 3 { print $3 }')
	n=$((n + 1))
done
[ "$n" -gt 0 ] && [ "${#def[@]}" -gt 0 ] || { echo "layers: no symbols read"; exit 1; }
for o in "$@"; do
	l=$(layer_of "$o")
	[ -n "${rank[$l]:-}" ] || continue
	while read -r sym; do
		dl=${def[$sym]:-}
		[ -n "$dl" ] || continue
		if [ "${rank[$dl]}" -gt "${rank[$l]}" ]; then
			echo "layers: ${o##*/src/} ($l) calls $sym ($dl, a higher layer)"
			bad=1
		fi
	done < <("$nm_bin" --undefined-only "$o" | awk '{ print $NF }')
done
[ $bad = 0 ] && echo "layers: $n objects, ${#def[@]} symbols: every include and call points down"
exit $bad
