package l2

// SkipMAC is c with the deliberate bug of a MAC check skipped (the
// checksums are still checked): a mutant for the tests that show the MAC
// is what refuses a forgery.
func SkipMAC(c *Codec) *Codec {
	d := *c
	d.skipMAC = true
	return &d
}
