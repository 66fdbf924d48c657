# benchratio.awk: medians and target ratios from `go test -bench` output of
# this package. Usage:
#   go test -bench . -run '^$' -count 3 ./upsert/ | tee bench.txt | awk -f upsert/benchratio.awk
/^Benchmark/ {
	name = $1
	sub(/-[0-9]+$/, "", name)
	sub(/^Benchmark(Apply|Mechanisms)\//, "", name)
	for (i = 3; i < NF; i++) {
		u = $(i + 1)
		s = name
		if (u ~ /:/) { s = "interleaved:" substr(u, 1, index(u, ":") - 1); u = substr(u, index(u, ":") + 1) }
		if (u != "rows/s" && u != "WAL-B/row") continue
		if (u == "rows/s") rate[s] = rate[s] " " $i
		else wal[s] = wal[s] " " $i
		if (!(s in seen)) { seen[s] = 1; order[++n] = s }
	}
}
function median(list,    a, k, i, j, t) {
	k = split(list, a, " ")
	for (i = 1; i <= k; i++) for (j = i + 1; j <= k; j++) if (a[j] + 0 < a[i] + 0) { t = a[i]; a[i] = a[j]; a[j] = t }
	if (k == 0) return 0
	return (k % 2) ? a[(k + 1) / 2] : (a[k / 2] + a[k / 2 + 1]) / 2
}
function ratio(label, num, den, target, cmp,    r, ok) {
	if (den == 0) return
	r = num / den
	ok = (cmp == ">=") ? (r >= target) : (r < target)
	printf "| %s | %.3f | %s %s | %s |\n", label, r, cmp, target, ok ? "met" : "NOT met"
}
END {
	print "| scenario | rows/s (median) | WAL bytes/row (median) | runs |"
	print "|---|---:|---:|---:|"
	for (i = 1; i <= n; i++) {
		s = order[i]
		if (rate[s] == "") continue
		printf "| %s | %.0f | %.1f | %d |\n", s, median(rate[s]), median(wal[s]), split(rate[s], tmp, " ")
		R[s] = median(rate[s]); W[s] = median(wal[s])
	}
	print ""
	print "| ratio | value | target | |"
	print "|---|---:|---|---|"
	ratio("interleaved: apply_new / copy_plain_new", R["interleaved:apply_new"], R["interleaved:copy_plain_new"], 0.75, ">=")
	ratio("interleaved: apply_new / row_by_row_new", R["interleaved:apply_new"], R["interleaved:row_by_row_new"], 5, ">=")
	ratio("interleaved: apply_unchanged / copy_plain_new", R["interleaved:apply_unchanged"], R["interleaved:copy_plain_new"], 1.0, ">=")
	ratio("interleaved: WAL apply_unchanged / WAL apply_new", W["interleaved:apply_unchanged"], W["interleaved:apply_new"], 0.05, "<")
	ratio("interleaved: apply_half_newer_half_stale / copy_plain_new", R["interleaved:apply_half_newer_half_stale"], R["interleaved:copy_plain_new"], 0, ">=")
	split("staging_upsert_no_prefilter unnest_upsert_no_prefilter", alts, " ")
	for (k = 1; k <= 2; k++) {
		a = "interleaved:" alts[k]
		ratio(a "_new / copy_plain_new", R[a "_new"], R["interleaved:copy_plain_new"], 0.75, ">=")
		ratio(a "_unchanged / copy_plain_new", R[a "_unchanged"], R["interleaved:copy_plain_new"], 1.0, ">=")
		ratio(a ": WAL unchanged / new", W[a "_unchanged"], W[a "_new"], 0.05, "<")
	}
	ratio("apply_new / copy_plain_new", R["apply_new"], R["copy_plain_new"], 0.75, ">=")
	ratio("apply_new / row_by_row_new", R["apply_new"], R["row_by_row_new"], 5, ">=")
	ratio("apply_unchanged / copy_plain_new", R["apply_unchanged"], R["copy_plain_new"], 1.0, ">=")
	ratio("WAL apply_unchanged / WAL apply_new", W["apply_unchanged"], W["apply_new"], 0.05, "<")
	ratio("apply_half_newer_half_stale / copy_plain_new", R["apply_half_newer_half_stale"], R["copy_plain_new"], 0, ">=")
	ratio("chosen_lookup_copy_new / copy_plain_new", R["chosen_lookup_copy_new"], R["copy_plain_new"], 0.75, ">=")
	ratio("chosen_lookup_copy_unchanged / copy_plain_new", R["chosen_lookup_copy_unchanged"], R["copy_plain_new"], 1.0, ">=")
	ratio("WAL chosen_lookup_copy unchanged / new", W["chosen_lookup_copy_unchanged"], W["chosen_lookup_copy_new"], 0.05, "<")
	ratio("staging_upsert_no_prefilter_new / chosen_lookup_copy_new", R["staging_upsert_no_prefilter_new"], R["chosen_lookup_copy_new"], 0, ">=")
	ratio("staging_upsert_no_prefilter_unchanged / chosen_lookup_copy_unchanged", R["staging_upsert_no_prefilter_unchanged"], R["chosen_lookup_copy_unchanged"], 0, ">=")
	ratio("unnest_upsert_no_prefilter_new / chosen_lookup_copy_new", R["unnest_upsert_no_prefilter_new"], R["chosen_lookup_copy_new"], 0, ">=")
	ratio("unnest_upsert_no_prefilter_unchanged / chosen_lookup_copy_unchanged", R["unnest_upsert_no_prefilter_unchanged"], R["chosen_lookup_copy_unchanged"], 0, ">=")
	ratio("staging_upsert_no_prefilter_new / copy_plain_new", R["staging_upsert_no_prefilter_new"], R["copy_plain_new"], 0.75, ">=")
	ratio("staging_upsert_no_prefilter_unchanged / copy_plain_new", R["staging_upsert_no_prefilter_unchanged"], R["copy_plain_new"], 1.0, ">=")
	ratio("WAL staging_upsert_no_prefilter unchanged / new", W["staging_upsert_no_prefilter_unchanged"], W["staging_upsert_no_prefilter_new"], 0.05, "<")
	ratio("unnest_upsert_no_prefilter_new / copy_plain_new", R["unnest_upsert_no_prefilter_new"], R["copy_plain_new"], 0.75, ">=")
	ratio("unnest_upsert_no_prefilter_unchanged / copy_plain_new", R["unnest_upsert_no_prefilter_unchanged"], R["copy_plain_new"], 1.0, ">=")
}
