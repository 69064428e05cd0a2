# lib-stats.sh - medians and spread of repeated measurements, for the
# bench scripts (lib-compare.sh, verbs-in-guest.sh). Sourced, never run.
#
# The sourcing script keeps its values in an associative array VALS:
# VALS[name] holds the numbers measured for name, space separated.

# stats NAME -> "median min max count" (empty when NAME has no value)
stats() {
	printf '%s\n' ${VALS[$1]:-} | awk 'NF { v[n++] = $1 }
		END {
			if (!n) exit
			for (i = 0; i < n; i++) for (j = i + 1; j < n; j++)
				if (v[j] < v[i]) { t = v[i]; v[i] = v[j]; v[j] = t }
			m = n % 2 ? v[(n - 1) / 2] : (v[n / 2 - 1] + v[n / 2]) / 2
			printf "%g %g %g %d\n", m, v[0], v[n - 1], n
		}'
}

# stats_json KEY NAME -> ,"KEY":median,"KEY_min":min,"KEY_max":max of
# NAME's values, or ,"KEY":null when it has none: fields of a JSON line.
stats_json() {
	local s
	s=$(stats "$2")
	if [ -n "$s" ]; then
		set -- "$1" $s
		printf ',"%s":%s,"%s_min":%s,"%s_max":%s' "$1" "$2" "$1" "$3" "$1" "$4"
	else
		printf ',"%s":null' "$1"
	fi
}

# median NAME -> the median of NAME (empty when NAME has no value)
median() { stats "$1" | awk '{ print $1 }'; }
