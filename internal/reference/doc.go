// Package reference holds slow, obviously correct models of kvalloc's
// allocator and manager, in the spirit of the Go runtime's SummarizeSlow:
// short enough to check by reading, too slow for anything but tests. The
// allocator's unit tests, the fuzz targets and the property tests all diff
// the real code against these models. Nothing outside tests imports it.
package reference
