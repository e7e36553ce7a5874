# Sourced by the measuring scripts here (measure.sh, placement.sh): a point's rounds as
# their awk grouped them, space-separated in round order.
# The median round (the lower of the middle two for an even count).
median_of() {
  tr ' ' '\n' <<<"$1" | grep . | sort -g | awk '{ x[NR] = $1 } END { print x[int((NR + 1) / 2)] }'
}
# Every round, comma-separated in round order (the last column of the files they write).
rounds_of() {
  tr ' ' ',' <<<"$1"
}
