# Summarises benches/netns/run.sh's round lines, sorted by entry, size and time
# (sort -k3,3 -k4,4n -k6,6g): per entry and size the median in-place time over the rounds,
# its range, the median against the ring's (flat ring time / this time, when `ring` ran) and
# the link bound's time against it (the whole vector each way at `bits_per_s`: the fraction
# of the bound reached).
function flush(   m) {
  if (n == 0) return
  m = n % 2 ? v[(n + 1) / 2] : (v[n / 2] + v[n / 2 + 1]) / 2
  keys[++k] = entry " " size; med[entry " " size] = m; lo[entry " " size] = v[1]; hi[entry " " size] = v[n]
  cnt[entry " " size] = n; n = 0
}
$1 == "round" {
  if ($3 " " $4 != entry " " size) { flush(); entry = $3; size = $4 }
  v[++n] = $6
}
END {
  flush()
  for (i = 1; i <= k; i++) {
    split(keys[i], f, " "); t = med[keys[i]] / 1000; bound = f[2] * 8 / bits_per_s * 1000
    line = sprintf("median %-16s %10d B  %8.1f ms (%.1f-%.1f, %d rounds)  link bound %.2f", \
      f[1], f[2], t, lo[keys[i]] / 1000, hi[keys[i]] / 1000, cnt[keys[i]], bound / t)
    if (("ring " f[2]) in med) line = line sprintf("  ring/this %.2f", med["ring " f[2]] / 1000 / t)
    print line
  }
}
